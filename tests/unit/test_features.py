"""capture.table_features: what capture may switch on in master tables (pure)."""

import pytest

from wlcore import tabledef
from wlcore.errors import ConfigError


def test_table_features_setting_is_checked():
    assert tabledef.switch_on(["change_feed"]) == {"delta.enableChangeDataFeed": "true"}
    assert tabledef.switch_on([]) == {} == tabledef.switch_on("none")
    assert set(tabledef.switch_on(["change_feed", "in_commit_timestamps"])) == {
        "delta.enableChangeDataFeed",
        "delta.enableInCommitTimestamps",
    }
    with pytest.raises(ConfigError, match="capture.table_features must be a list of change_feed, in_commit_timestamps"):
        tabledef.chosen(["change_feeds"])
