"""bpbc.settings: a run's settings and their defaults, apart from the pipeline."""

from __future__ import annotations

import pytest

from bpbc.settings import STRANDS, ScreenSettings, strands_of


def test_strands_of_names_the_choices():
    assert strands_of("both") == ("+", "-") and strands_of("forward") == ("+",)
    assert list(STRANDS) == ["both", "forward"]
    with pytest.raises(ValueError) as error:
        strands_of("reverse")
    assert str(error.value) == "strand must be one of both, forward, got 'reverse'"


def test_settings_give_their_strands():
    assert ScreenSettings().strands == ("+", "-") and ScreenSettings(strand="forward").strands == ("+",)
