"""capture.table_features: what capture may switch on in master tables (pure)."""

import pytest

from wlcore import features
from wlcore.errors import ConfigError


def test_table_features_setting_is_checked():
    assert features.switch_on(["change_feed"]) == {"delta.enableChangeDataFeed": "true"}
    assert features.switch_on([]) == {} == features.switch_on("none")
    assert set(features.switch_on(["change_feed", "in_commit_timestamps"])) == {
        "delta.enableChangeDataFeed",
        "delta.enableInCommitTimestamps",
    }
    with pytest.raises(ConfigError, match="capture.table_features must be a list of change_feed, in_commit_timestamps"):
        features.chosen(["change_feeds"])
