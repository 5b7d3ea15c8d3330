"""Selective replication's selection (wlr.select): patterns, predicates, recorded and compared."""

from __future__ import annotations

import pytest

from wlcore.errors import ConfigError
from wlcore.state import ReplicaState
from wlr.errors import ReplicaStateError
from wlr.select import Selection, check_same


def test_patterns_choose_tables_case_insensitively():
    sel = Selection.of(["sales.*", "HR.Employees"])
    assert sel.wants("sales.orders") and sel.wants("Sales.Lines") and sel.wants("hr.employees")
    assert not sel.wants("hr.salaries") and not sel.wants("tmp.sales")
    assert Selection.of().wants("any.table") and Selection.of().everything
    assert Selection.of("sales.orders").tables == ("sales.orders",)


def test_predicates_belong_to_selected_tables():
    sel = Selection.of(["sales.*"], {"Sales.Orders": " o_region = 'EU' "})
    assert sel.predicate("sales.orders") == "o_region = 'EU'" and sel.predicate("sales.lines") is None
    with pytest.raises(ConfigError, match="not among tables"):
        Selection.of(["sales.*"], {"hr.employees": "dept = 1"})
    with pytest.raises(ConfigError, match="predicate of sales.orders is empty"):
        Selection.of(None, {"sales.orders": " "})
    with pytest.raises(ConfigError, match="one table a predicate"):
        Selection.of(None, {"sales.*": "x = 1"})
    with pytest.raises(ConfigError, match="not a schema.table"):
        Selection.of(["orders"])


def test_recorded_selection_round_trips_and_another_is_refused():
    sel = Selection.of(["sales.*", "hr.employees"], {"sales.orders": "o_region = 'EU'"})
    state = ReplicaState.of(**sel.to_state())
    assert Selection.from_state(state) == sel
    assert Selection.from_state(ReplicaState()) == Selection.of() and Selection.of().to_state() == {
        "select_tables": [],
        "select_where": {},
    }
    # as wlr.config holds it: a JSON list and a JSON object, empty when not selected
    text = ReplicaState.of(**sel.to_state()).to_text()
    assert 'select_tables=["hr.employees", "sales.*"]' in text
    assert """select_where={"sales.orders": "o_region = 'EU'"}""" in text
    check_same(sel, Selection.of(["hr.employees", "sales.*"], {"sales.orders": "o_region = 'EU'"}), "r")
    with pytest.raises(ReplicaStateError, match="make a new replica"):
        check_same(sel, Selection.of(["sales.*"], {"sales.orders": "o_region = 'US'"}), "r")
    assert "sales.orders WHERE o_region = 'EU'" in sel.describe()
