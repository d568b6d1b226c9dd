"""config.load_config: YAML → frozen pydantic models; errors name the key path, never a secret."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.errors import BadInputError

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "config.yml"
SECRET = "Zq9-DISTINCT-bot-secret-7Hx2"


def write(tmp_path: Path, text: str, name: str = "config.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_example_config_loads() -> None:
    config = load_config(EXAMPLE)
    assert config.bot.app_id == "102000001"
    assert config.bot.secret.get_secret_value() == ""
    assert config.idmap.data_dir == Path("data")
    assert config.idmap.map_size_mb == 64
    assert config.log.level == "info"
    assert config.log.format == "console"
    assert config.identity_db_path == Path("data") / "openid-map.db"
    assert config.onebot.ping_timeout_seconds == 10 == Config().onebot.ping_timeout_seconds


def test_full_config_loads(tmp_path: Path) -> None:
    path = write(tmp_path, f"""
bot:
  app_id: "102000002"
  secret: "{SECRET}"
idmap:
  data_dir: {tmp_path / "d"}
  map_size_mb: 8
log:
  level: debug
  format: json
""")
    config = load_config(str(path))  # str paths work too
    assert config.bot.app_id == "102000002"
    assert config.bot.secret.get_secret_value() == SECRET
    assert config.idmap.data_dir == tmp_path / "d"
    assert config.idmap.map_size_mb == 8
    assert config.log.level == "debug"
    assert config.log.format == "json"
    assert config.identity_db_path == tmp_path / "d" / "openid-map.db"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    config = load_config(write(tmp_path, text))
    assert config == Config()
    assert config.bot.app_id == ""
    assert config.idmap.map_size_mb == 64
    assert config.log.level == "info"


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "idmap:\n  map_size_mb: 8\n"))
    with pytest.raises(pydantic.ValidationError):
        config.idmap.map_size_mb = 9  # type: ignore[misc]
    assert config.idmap.map_size_mb == 8


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("bot:\n  app_idd: '1'\n", "bot.app_idd"),
        ("idmap:\n  data_dri: x\n", "idmap.data_dri"),
        ("logs:\n  level: info\n", "logs"),
        ("log:\n  level: info\n  colour: true\n", "log.colour"),
    ],
)
def test_unknown_key_is_refused_by_path(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, text))
    assert err.value.field == where
    assert err.value.message.startswith(f"{where}: ")
    assert "not permitted" in err.value.reason


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('idmap:\n  map_size_mb: "x"\n', "idmap.map_size_mb"),
        ("idmap:\n  map_size_mb: 0\n", "idmap.map_size_mb"),
        ("idmap:\n  map_size_mb: [1]\n", "idmap.map_size_mb"),
        ("log:\n  level: verbose\n", "log.level"),
        ("log:\n  format: xml\n", "log.format"),
        ("bot: 5\n", "bot"),
    ],
)
def test_bad_type_names_the_key(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, text))
    assert err.value.field == where
    assert err.value.message.startswith(f"{where}: ")


@pytest.mark.parametrize("app_id", ["abc", "102a", "-1", "1.5", " 1", "１２３", "1²", "٣"])
def test_non_digit_app_id_is_refused(tmp_path: Path, app_id: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, f'bot:\n  app_id: "{app_id}"\n'))
    assert err.value.field == "bot.app_id"
    assert "AppID must be 1 to 20 digits" in err.value.message


def test_app_id_must_fit_identity_keys(tmp_path: Path) -> None:
    # identity.OpenId takes 1 to 20 ASCII digits; the config must not accept an AppID
    # that every later OpenId of it would refuse
    config = load_config(write(tmp_path, f'bot:\n  app_id: "{"1" * 20}"\n'))
    assert config.bot.app_id == "1" * 20
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, f'bot:\n  app_id: "{"1" * 21}"\n'))
    assert err.value.field == "bot.app_id"


def test_an_unquoted_app_id_is_taken_as_written(tmp_path: Path) -> None:
    """The Go daemon's template writes `app_id: 12345`: the digits are taken as the file
    has them (0123 stays 0123, where YAML reads octal 83); a number that is not plain
    digits is refused, never converted."""
    for digits in ("12345", "102000001", "0123", "1" * 20):
        config = load_config(write(tmp_path, f"bot:\n  app_id: {digits}\n"), {})
        assert config.bot.app_id == digits
    for text in ("bot:\n  app_id: 0x1F\n", "bot:\n  app_id: 1_000\n",
                 "bot:\n  app_id: " + "1" * 21 + "\n"):
        with pytest.raises(BadInputError) as err:
            load_config(write(tmp_path, text), {})
        assert err.value.field == "bot.app_id"
    with pytest.raises(pydantic.ValidationError):  # built in code: no digits to go by
        Config.model_validate({"bot": {"app_id": 12345}})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(digits=st.text(alphabet="0123456789", min_size=1, max_size=20),
       style=st.sampled_from(["block", "flow"]))
def test_unquoted_digits_are_the_app_id_whatever_yaml_reads(tmp_path: Path, digits: str,
                                                             style: str) -> None:
    text = (f"bot:\n  app_id: {digits}\n" if style == "block"
            else f"bot: {{app_id: {digits}, secret: s}}\n")
    assert load_config(write(tmp_path, text), {}).bot.app_id == digits


@pytest.mark.parametrize(
    "text",
    [
        f'bot:\n  app_id: "abc"\n  secret: "{SECRET}"\n',
        f'bot:\n  secret: "{SECRET}"\n  extra: 1\n',
        f'bot:\n  secret: ["{SECRET}"]\n',
        f'bot:\n  secret: {{"{SECRET}": 1}}\n',
        f'bot:\n  secret: "{SECRET}"\nidmap:\n  map_size_mb: "x"\n',
    ],
)
def test_secret_never_in_validation_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BadInputError) as err:
        load_config(path)
    for shown in (str(err.value), repr(err.value), err.value.message, repr(err.value.value),
                  err.value.reason):
        assert SECRET not in shown


@pytest.mark.parametrize(
    "text",
    [
        f'bot:\n  secret: "{SECRET}\n',  # unterminated quote on the secret's line
        f"bot:\n  secret: {SECRET}: x\n",  # a ':' typo on the secret's line
        f"bot:\n  secret: {SECRET}\n   app_id: [1\n",
    ],
)
def test_secret_never_in_yaml_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BadInputError) as err:
        load_config(path)
    assert err.value.field == "config"
    assert "not valid YAML" in err.value.message
    assert SECRET not in str(err.value)


def test_secret_never_in_repr_or_str(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, f'bot:\n  app_id: "1"\n  secret: "{SECRET}"\n'))
    assert config.bot.secret.get_secret_value() == SECRET
    for shown in (repr(config), str(config), repr(config.bot), str(config.bot),
                  repr(config.bot.secret), str(config.bot.secret), f"{config}",
                  config.model_dump_json()):
        assert SECRET not in shown
    assert "app_id='1'" in repr(config.bot)  # other fields still print


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    with pytest.raises(BadInputError) as err:
        load_config(missing)
    assert err.value.field == "config"
    assert err.value.value == str(missing)
    assert "cannot read" in err.value.message
    assert "No such file" in err.value.message
    assert str(missing) in err.value.message


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(tmp_path)
    assert err.value.field == "config"
    assert "cannot read" in err.value.message


@pytest.mark.parametrize("text", ["bot: [\n", "bot:\n  app_id: '1\n", "a: b: c\n", "\tbot: {}\n"])
def test_invalid_yaml(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BadInputError) as err:
        load_config(path)
    assert err.value.field == "config"
    assert err.value.value == str(path)
    assert "not valid YAML" in err.value.message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, text))
    assert err.value.field == "config"
    assert "top level must be a mapping" in err.value.message


def test_non_utf8_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes(b'bot:\n  app_id: "1"\n  secret: "caf\xe9"\n')
    with pytest.raises(BadInputError) as err:
        load_config(path)
    assert err.value.field == "config"
    assert err.value.value == str(path)


@pytest.mark.parametrize("key", ["webhook.listen", "onebot.forward_ws", "onebot.http_api",
                                 "api.listen"])
def test_every_listen_address_takes_ipv6_in_brackets_only(tmp_path: Path, key: str) -> None:
    """One parser (hostport.parse_host_port) for every listen key: "[::]:15631" is read,
    an IPv6 address without brackets or anything else in brackets is refused by key path."""
    section, name = key.split(".")
    ok = load_config(write(tmp_path, f'{section}:\n  {name}: "[::]:15631"\n'))
    assert getattr(getattr(ok, section), name) == "[::]:15631"
    for bad in ("::1:15631", "[localhost]:15631", "localhost:8O80"):
        with pytest.raises(BadInputError) as err:
            load_config(write(tmp_path, f'{section}:\n  {name}: "{bad}"\n'))
        assert err.value.field == key
        assert "or empty to switch off" in err.value.reason


def test_webhook_max_age_defaults_to_600_and_must_be_positive(tmp_path: Path) -> None:
    assert load_config(EXAMPLE).webhook.max_age_seconds == Config().webhook.max_age_seconds == 600
    assert load_config(write(tmp_path, "webhook: {max_age_seconds: 120}\n")
                       ).webhook.max_age_seconds == 120
    with pytest.raises(BadInputError, match="webhook.max_age_seconds"):
        load_config(write(tmp_path, "webhook: {max_age_seconds: 0}\n"))


def test_runtime_backend_defaults_to_lmdb_and_redis_needs_a_url(tmp_path: Path) -> None:
    assert (Config().idmap.runtime_backend, Config().idmap.redis_prefix) == ("lmdb", "gsk:")
    config = load_config(write(tmp_path, "idmap: {runtime_backend: redis, "
                                         "redis_url: 'redis://127.0.0.1:6379/0'}"))
    assert config.idmap.runtime_backend == "redis"
    with pytest.raises(BadInputError, match="redis_url"):
        load_config(write(tmp_path, "idmap: {runtime_backend: redis}"))
    with pytest.raises(BadInputError, match="redis_url"):
        load_config(write(tmp_path, "idmap: {redis_url: 'http://127.0.0.1:6379'}"))
    with pytest.raises(BadInputError, match="runtime_backend"):
        load_config(write(tmp_path, "idmap: {runtime_backend: memcached}"))


@pytest.mark.parametrize("prefix", ["", "a b", "gsk*", "x?", "[a]", "a\\b", "x" * 65])
def test_redis_prefix_must_be_a_plain_scan_pattern(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(BadInputError, match="redis_prefix"):
        load_config(write(tmp_path, f"idmap: {{redis_prefix: {prefix!r}}}"))


def test_the_gateway_shard_is_index_and_count_with_the_index_below_the_count(
        tmp_path: Path) -> None:
    assert Config().qq.shard == load_config(EXAMPLE).qq.shard == (0, 1)
    assert load_config(write(tmp_path, "qq: {shard: [1, 2]}")).qq.shard == (1, 2)
    assert load_config(write(tmp_path, "qq: {shard: [1, 2]}"),
                       {"GSK_QQ__SHARD": "[0, 4]"}).qq.shard == (0, 4)
    for bad in ("[2, 2]", "[0, 0]", "[-1, 2]", "[0, 1, 2]", "[true, 2]", "'0,1'", "[0.5, 1]"):
        with pytest.raises(BadInputError, match=r"qq\.shard"):
            load_config(write(tmp_path, f"qq: {{shard: {bad}}}"))


def test_the_identity_cache_bounds_are_sizes_and_positive_ages(tmp_path: Path) -> None:
    idmap = Config().idmap
    assert (idmap.identity_cache_size, idmap.identity_cache_max_age_seconds) == (100_000, 30)
    assert load_config(write(tmp_path, "idmap: {identity_cache_size: 0}")
                       ).idmap.identity_cache_size == 0
    for bad in ("{identity_cache_size: -1}", "{identity_cache_max_age_seconds: 0}"):
        with pytest.raises(BadInputError, match="identity_cache"):
            load_config(write(tmp_path, f"idmap: {bad}"))


def test_unsupported_segments_are_refused_by_default_or_dropped(tmp_path: Path) -> None:
    assert load_config(EXAMPLE).onebot.unsupported_segments == "refuse"
    assert Config().onebot.unsupported_segments == "refuse"
    config = load_config(write(tmp_path, "onebot: {unsupported_segments: drop}\n"))
    assert config.onebot.unsupported_segments == "drop"
    with pytest.raises(BadInputError, match="onebot.unsupported_segments"):
        load_config(write(tmp_path, "onebot: {unsupported_segments: ignore}\n"))


def test_message_content_is_kept_by_default_and_can_be_switched_off(tmp_path: Path) -> None:
    assert load_config(EXAMPLE).idmap.keep_message_content is True
    assert Config().idmap.keep_message_content is True
    config = load_config(write(tmp_path, "idmap: {keep_message_content: false}\n"))
    assert config.idmap.keep_message_content is False
    with pytest.raises(BadInputError, match="idmap.keep_message_content"):
        load_config(write(tmp_path, "idmap: {keep_message_content: sometimes}\n"))


def test_each_transport_token_defaults_to_access_token(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, (
        "onebot:\n  access_token: T0\n  forward_ws_access_token: F1\n"
        "  http_api_access_token: ''\n"
        "  reverse_ws: [ws://a/ws, {url: ws://b/ws, access_token: R2}, {url: ws://c/ws}]\n"
        "  http_post: [{url: http://p/}, {url: http://q/, secret: S3}, "
        "{url: http://r/, secret: ''}]\n")), {})
    onebot = config.onebot
    assert onebot.reverse_ws_targets() == [("ws://a/ws", "T0"), ("ws://b/ws", "R2"),
                                           ("ws://c/ws", "T0")]
    assert onebot.token(onebot.forward_ws_access_token) == "F1"
    assert onebot.token(onebot.http_api_access_token) == ""  # set empty: none
    assert [onebot.token(post.secret) for post in onebot.http_post] == ["T0", "S3", ""]
    assert "R2" not in repr(config) and "F1" not in repr(config)
    assert load_config(write(tmp_path, "onebot: {}\n"), {}).onebot.reverse_ws_targets() == []


@pytest.mark.parametrize("entry", ["{url: http://b/ws, access_token: " + SECRET + "}",
                                   "{access_token: " + SECRET + "}",
                                   "{url: ws://b/ws, token: " + SECRET + "}"])
def test_a_bad_reverse_ws_entry_is_refused_without_its_token(tmp_path: Path,
                                                             entry: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, f"onebot:\n  reverse_ws: [{entry}]\n"), {})
    assert err.value.field.startswith("onebot.reverse_ws")
    assert SECRET not in str(err.value)


def test_intents_take_a_number_or_names(tmp_path: Path) -> None:
    def intents(text: str) -> int:
        return load_config(write(tmp_path, f"qq:\n  intents: {text}\n"), {}).qq.intents

    assert intents("33554432") == 1 << 25
    assert intents("[GROUP_AND_C2C_EVENT, public_guild_messages, DIRECT_MESSAGE]") == (
        (1 << 25) | (1 << 30) | (1 << 12))
    assert intents("[GUILD_MESSAGES, GUILD_MEMBERS, GUILD_MEMBERS]") == (1 << 9) | (1 << 1)
    with pytest.raises(BadInputError) as err:
        intents("[GROUP_AND_C2C_EVENT, GUILD_MESAGES]")
    assert err.value.field == "qq.intents" and "GUILD_MESAGES" in err.value.message
    assert "PUBLIC_GUILD_MESSAGES" in err.value.message  # the known names are listed


def test_trusted_proxies_are_networks_and_never_everyone(tmp_path: Path) -> None:
    assert Config().api.trusted_proxies == load_config(EXAMPLE).api.trusted_proxies == []
    config = load_config(write(tmp_path, "api: {trusted_proxies: [10.0.0.5/32, 'fd00::/8']}"))
    assert config.api.trusted_proxies == ["10.0.0.5/32", "fd00::/8"]
    assert load_config(write(tmp_path, "{}"), {"GSK_API__TRUSTED_PROXIES": "[127.0.0.1/32]"}
                       ).api.trusted_proxies == ["127.0.0.1/32"]
    with pytest.raises(BadInputError, match=r"api\.trusted_proxies.*'proxy\.lan' is not a "
                                            r"network"):
        load_config(write(tmp_path, "api: {trusted_proxies: [proxy.lan]}"))
    for everyone in ("0.0.0.0/0", "::/0"):
        with pytest.raises(BadInputError, match=r"api\.trusted_proxies.*trusts every address"):
            load_config(write(tmp_path, f"api: {{trusted_proxies: ['{everyone}']}}"))


def test_allowed_hosts_are_names_written_as_hosts_are_read(tmp_path: Path) -> None:
    assert Config().api.allowed_hosts == load_config(EXAMPLE).api.allowed_hosts == []
    config = load_config(write(tmp_path, "api: {allowed_hosts: [Idmap.Example.org., gensokyo]}"))
    assert config.api.allowed_hosts == ["idmap.example.org", "gensokyo"]
    from_env = load_config(write(tmp_path, ""),
                           environ={"GSK_API__ALLOWED_HOSTS": "[idmap.example.org]"})
    assert from_env.api.allowed_hosts == ["idmap.example.org"]


@pytest.mark.parametrize(("entry", "words"), [
    ("'*.example.org'", "no wildcards"), ("'idmap.example.org:443'", "without a port"),
    ("10.0.0.5", "IP address"), ("bücher.example", "xn--bcher-kva.example"),
    ("'http://idmap.example.org'", "not a host name"), ("5", "string")])
def test_a_bad_allowed_host_is_refused_naming_the_key(tmp_path: Path, entry: str,
                                                      words: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, f"api: {{allowed_hosts: [{entry}]}}"))
    assert "api.allowed_hosts" in str(err.value) and words in str(err.value), str(err.value)
