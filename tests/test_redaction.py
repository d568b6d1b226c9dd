"""redaction: URL credentials and secret-named values never shown; everything else as is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.redaction import describe_dsn, is_secret_name, redact_text, redact_url

SECRET = "Zq9-DISTINCT-redact-7Hx2"
#: What a password or token may look like (no delimiter the redaction stops at).
secrets = st.text(st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from("-_.~!$"),
                  min_size=1, max_size=20)


@pytest.mark.parametrize(("text", "expected"), [
    ("ws://user:pw@host:8080/ws", "ws://***@host:8080/ws"),
    ("wss://tok3n@host/onebot/v11/ws", "wss://***@host/onebot/v11/ws"),
    ("ws://u:p@ss@host/x?y=1", "ws://***@host/x?y=1"),  # an unescaped @ in the password
    # an unescaped ?, / or # in a password: a driver reads it as the query, path or
    # fragment and names the URL in its error; no part of the password may show
    ("postgresql://u:pa?ss@h/db", "postgresql://***@h/db"),
    ("postgresql://u:pa/ss@h:5432/db", "postgresql://***@h:5432/db"),
    ("redis://:p#w@h:6379/0", "redis://***@h:6379/0"),
    ("ws://host/ws?access_token=abc&x=1", "ws://host/ws?access_token=***&x=1"),
    ("http://h/p?q=1&clientSecret=zz&x=1", "http://h/p?q=1&clientSecret=***&x=1"),
    ("listeners: reverse ws ws://a:b@h/ws, http post http://c:d@h2/p",
     "listeners: reverse ws ws://***@h/ws, http post http://***@h2/p"),
    ("ws://127.0.0.1:6700/", "ws://127.0.0.1:6700/"),
    ("mail me at a@b.c", "mail me at a@b.c"),
])
def test_redact_url_hides_credentials_only(text: str, expected: str) -> None:
    assert redact_url(text) == expected
    assert redact_text(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("[{url: http://x, secret: s3cret", "[{url: http://x, secret: ***"),
    ('{"secret": "a b", "url": 1}', '{"secret": ***, "url": 1}'),
    ("{url: 'http://u:p@h', secret: 'x y'}", "{url: 'http://***@h', secret: ***}"),
    ("Authorization: Bearer abc", "Authorization: Bearer ***"),
    ("access_token=abc other", "access_token=*** other"),
])
def test_redact_text_also_hides_named_values(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_our_own_messages_stay_readable() -> None:
    reason = "bot.secret: not configured: callbacks cannot be verified"
    assert redact_url(reason) is reason  # logs keep field names followed by ':'
    plain = "[idmap] identity create openid:QQ:102000001:9F3A"
    assert redact_text(plain) is plain


@given(secrets, st.sampled_from(["ws://user:{s}@h:1/ws", "ws://{s}@h/ws",
                                 "wss://h/ws?access_token={s}", "http://h/p?a=1&token={s}&b=2",
                                 "url: http://h, secret: {s}}}]", '{{"secret": "{s}"}}',
                                 "password={s}", "Authorization: Bearer {s}"]))
def test_a_secret_never_survives(secret: str, template: str) -> None:
    """Whatever the secret, the text shows exactly what it shows for any other one."""
    assert redact_text(template.format(s=secret)) == redact_text(template.format(s="PLAIN"))
    if "://" in template and "url:" not in template:  # the secret is part of the URL
        assert redact_url(template.format(s=secret)) == redact_url(template.format(s="PLAIN"))


@pytest.mark.parametrize("name", ["secret", "bot.secret", "clientSecret", "access_token",
                                  "Authorization", "password", "onebot.http_post.0.secret"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert not is_secret_name("onebot.http_post.0.url")


def test_bad_input_errors_echo_no_credentials() -> None:
    err = BadInputError("onebot.reverse_ws", f"[ws://user:{SECRET}@h/ws",
                        f"'http://user:{SECRET}@h' is not a ws:// URL")
    for shown in (err.message, str(err), repr(err.value), err.reason):
        assert SECRET not in shown
    assert err.value == "[ws://***@h/ws"


@pytest.mark.parametrize(("dsn", "shown"), [
    ("postgresql://gsk:s3cret@db:5432/graph", "postgresql://***@db:5432/graph"),
    ("postgresql://127.0.0.1/test", "postgresql://127.0.0.1/test"),
    ("host=db user=gsk password=s3cret", "the configured PostgreSQL"),  # nothing echoed
])
def test_a_dsn_is_described_without_its_password(dsn: str, shown: str) -> None:
    assert describe_dsn(dsn) == shown


#: A password as an operator may write it unescaped into a DSN: the URL delimiters too.
unescaped_passwords = st.text(st.characters(codec="ascii", categories=["L", "N"])
                              | st.sampled_from("/?#@:-_.~!$"), min_size=1, max_size=20)


@given(unescaped_passwords, st.sampled_from(["postgresql://gsk:{s}@db.example:5432/idmap",
                                             "redis://:{s}@127.0.0.1:6379/0",
                                             "could not connect to postgresql://u:{s}@h/db"]))
def test_no_part_of_an_unescaped_password_shows(password: str, template: str) -> None:
    """Whatever delimiters the password holds, the text shows what it shows for any other."""
    shown = redact_url(template.format(s=password))
    assert shown == redact_url(template.format(s="PLAIN"))
