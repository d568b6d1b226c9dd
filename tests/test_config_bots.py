"""config: the ``bots`` list beside ``bot`` (issue 34.1): what it takes, and every refusal,
each naming its keys (and the variable it came from) and never a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.config import load_config
from gensokyo_idmap.errors import BadInputError

SECRET_A = "Zq9-first-bot-secret-7Hx2"
SECRET_B = "Wr4-second-bot-secret-9Lp"
TWO_BOTS = ('bots:\n'
            '  - app_id: "102000001"\n'
            f'    secret: "{SECRET_A}"\n'
            '  - app_id: "102000002"\n'
            '    self_id: 20002\n')


def write(tmp_path: Path, text: str, name: str = "config.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refusal(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> BadInputError:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, text), environ or {})
    for shown in (str(err.value), err.value.reason, repr(err.value.value)):
        assert SECRET_A not in shown and SECRET_B not in shown
    return err.value


def test_two_bots_load_in_order_with_their_self_ids(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, TWO_BOTS), {})
    assert [bot.app_id for bot in config.bots] == ["102000001", "102000002"]
    assert [bot.own_self_id for bot in config.bots] == [102000001, 20002]
    assert config.bots[0].secret.get_secret_value() == SECRET_A
    assert config.self_id == 102000001 and config.first_bot.app_id == "102000001"
    assert SECRET_A not in repr(config) and SECRET_A not in config.model_dump_json()


def test_bot_alone_is_still_one_bot(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, 'bot:\n  app_id: "102000001"\n'), {})
    assert config.bots == [] and config.first_bot.app_id == "102000001"


def test_bot_and_bots_at_once_are_refused_naming_both(tmp_path: Path) -> None:
    err = refusal(tmp_path, 'bot:\n  app_id: "102000009"\n' + TWO_BOTS)
    assert err.field == "bot"
    assert "bot and bots are both set" in err.reason and "in " in err.reason


def test_bot_from_the_environment_beside_bots_names_the_variable(tmp_path: Path) -> None:
    err = refusal(tmp_path, TWO_BOTS, {"GSK_BOT__SECRET": SECRET_B})
    assert err.field == "bot" and "bot and bots are both set" in err.reason
    assert "from GSK_BOT__SECRET" in err.reason


@pytest.mark.parametrize(("second", "where", "key"), [
    ('  - app_id: "102000001"\n', "bots.1.app_id", "app_id"),
    ('  - app_id: "102000009"\n    self_id: 102000001\n', "bots.1.self_id", "self_id"),
])
def test_duplicate_app_ids_and_self_ids_are_refused_naming_both_entries(
        tmp_path: Path, second: str, where: str, key: str) -> None:
    text = ('bots:\n  - app_id: "102000001"\n'
            f'    secret: "{SECRET_A}"\n' + second)
    err = refusal(tmp_path, text)
    assert err.field == where
    assert f"bots.0 and bots.1 have the same {key}" in err.reason
    assert err.value == "102000001"


def test_a_self_id_equal_to_another_bots_default_is_refused(tmp_path: Path) -> None:
    text = ('bots:\n  - app_id: "102000001"\n    self_id: 5\n'
            '  - app_id: "102000002"\n    self_id: 102000001\n'
            '  - app_id: "102000001000"\n    self_id: 5\n')
    err = refusal(tmp_path, text)
    assert err.field == "bots.2.self_id" and "bots.0 and bots.2" in err.reason
    assert "defaults to the AppID" in err.reason


def test_onebot_self_id_is_refused_with_bots(tmp_path: Path) -> None:
    err = refusal(tmp_path, TWO_BOTS + "onebot:\n  self_id: 7\n")
    assert err.field == "onebot.self_id" and "each entry sets its own self_id" in err.reason


def test_an_entry_needs_its_app_id(tmp_path: Path) -> None:
    err = refusal(tmp_path, f'bots:\n  - secret: "{SECRET_A}"\n')
    assert err.field == "bots.0.app_id"
    err = refusal(tmp_path, 'bots:\n  - app_id: ""\n')
    assert err.field == "bots.0.app_id" and "needs its app_id" in err.reason


def test_an_unquoted_app_id_in_bots_is_taken_as_written(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "bots:\n  - app_id: 0123\n  - app_id: 102000002\n"),
                         {})
    assert [bot.app_id for bot in config.bots] == ["0123", "102000002"]
    err = refusal(tmp_path, "bots:\n  - app_id: 0x1F\n")
    assert err.field == "bots.0.app_id" and "quote the AppID" in err.reason


def test_bots_given_as_one_mapping_says_it_is_a_list(tmp_path: Path) -> None:
    err = refusal(tmp_path, 'bots:\n  app_id: "102000001"\n')
    assert err.field == "bots" and "is a list of bots" in err.reason


def test_a_secret_file_is_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "b.secret").write_text(f"{SECRET_B}\n", encoding="utf-8")
    config = load_config(write(tmp_path, TWO_BOTS + "    secret_file: b.secret\n"), {})
    assert config.bots[1].secret.get_secret_value() == SECRET_B
    assert SECRET_B not in repr(config)


@pytest.mark.parametrize(("content", "why"), [(None, "cannot read"), ("\n \n", "is empty")])
def test_a_secret_file_that_gives_no_secret_is_refused_naming_its_key(
        tmp_path: Path, content: str | None, why: str) -> None:
    if content is not None:
        (tmp_path / "b.secret").write_text(content, encoding="utf-8")
    err = refusal(tmp_path, TWO_BOTS + "    secret_file: b.secret\n")
    assert err.field == "bots.1.secret_file" and why in err.reason


def test_secret_and_secret_file_at_once_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.secret").write_text(SECRET_B, encoding="utf-8")
    err = refusal(tmp_path, TWO_BOTS.replace("    self_id: 20002\n", "") +
                  f'    secret: "{SECRET_B}"\n    secret_file: a.secret\n')
    assert err.field == "bots.1.secret_file" and "both set" in err.reason
    err = refusal(tmp_path, f'bot:\n  secret: "{SECRET_A}"\n  secret_file: a.secret\n')
    assert err.field == "bot.secret_file"


def test_the_secret_of_an_entry_comes_from_its_variable(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, TWO_BOTS), {"GSK_BOTS__1__SECRET": SECRET_B,
                                                     "GSK_BOTS__1__QQ__GATEWAY": "true"})
    assert config.bots[1].secret.get_secret_value() == SECRET_B
    assert config.bots[1].qq is not None and config.bots[1].qq.gateway is True
    assert config.bots[0].secret.get_secret_value() == SECRET_A


@pytest.mark.parametrize(("var", "where", "why"), [
    ("GSK_BOTS__2__SECRET", "bots.2.secret", "bots has no entry 2 (it has 2)"),
    ("GSK_BOTS__SECRET", "bots.secret", "bots is a list: name the entry"),
    ("GSK_BOTS__0__SECERT", "bots.0.secert", "did you mean `GSK_BOTS__0__SECRET`?"),
])
def test_a_variable_for_no_entry_is_refused_naming_it(tmp_path: Path, var: str, where: str,
                                                      why: str) -> None:
    err = refusal(tmp_path, TWO_BOTS, {var: SECRET_B})
    assert err.field == where and why in err.reason and f"from {var}" in err.reason


def test_an_entrys_own_keys_are_checked_where_they_are(tmp_path: Path) -> None:
    err = refusal(tmp_path, TWO_BOTS + "    qq: {api_base: ftp://x}\n")
    assert err.field == "bots.1.qq.api_base"
    err = refusal(tmp_path, TWO_BOTS + "    onebot: {reverse_ws: [http://x]}\n")
    assert err.field == "bots.1.onebot.reverse_ws"
    err = refusal(tmp_path, TWO_BOTS + "    onebot: {forward_ws: '127.0.0.1:1'}\n")
    assert err.field == "bots.1.onebot.forward_ws" and "not permitted" in err.reason
