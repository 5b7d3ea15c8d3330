"""Table names: qualified names, parsing, path-escape checks, batch folders, state keys."""

import pytest

from wlcore.errors import ConfigError
from wlcore.names import batch_folder, check_part, qualified, split_name, state_key, uncarried_reason


@pytest.mark.parametrize(
    "schema, table, text",
    [
        ("s", "t", "s.t"),
        ("s", "it's", "s.it's"),
        ("my-schema", "ünïcødé", "my-schema.ünïcødé"),
        ("s", "do.t", "s.`do.t`"),
        ("a`b", "c", "`a``b`.c"),
        ("s", "sp ace", "s.sp ace"),
    ],
)
def test_qualified_names_round_trip(schema, table, text):
    assert qualified(schema, table) == text
    assert split_name(text) == (schema, table)


@pytest.mark.parametrize("bad", ["a.b.c", "s.", ".t", "s.`x", "s.x`y", "../x.y", "s./", "s...", "noschema", 42])
def test_malformed_or_escaping_names_are_refused(bad):
    with pytest.raises(ConfigError):
        split_name(bad)


def test_parts_that_leave_the_folder_are_refused():
    for part in ("", ".", "..", "a/b", "a\x00b"):
        with pytest.raises(ConfigError, match="not allowed"):
            check_part(part, "table")
    assert check_part("it's", "table") == "it's"


def test_names_that_cannot_be_carried_say_why():
    for sep in ("new\nline", "tab\tx", "u\u2028x", "u\u2029x", "u\x85x"):
        assert "control character" in uncarried_reason(sep)
    assert "UTF-8" in uncarried_reason("bad\udcffbyte")
    assert uncarried_reason("ünïcødé") is None


def test_batch_folders_are_safe_and_distinct():
    assert batch_folder("s.t") == "s.t"
    odd = [batch_folder(n) for n in ("s.it's", "s.br{a}", "s.sq[1]", "s.`do.t`")]
    assert all(f.startswith("t_") and f.replace("_", "").isalnum() for f in odd)
    assert len(set(odd)) == len(odd)


def test_state_keys_are_one_line_without_equals():
    assert state_key("version.", "s.t") == "version.s.t"
    key = state_key("version.", "s.`a=b\nc`")
    assert "=" not in key and "\n" not in key
