"""One masking mechanism for every output: plain and escaped forms, longest first, short values kept."""

from __future__ import annotations

import json

from bootstrap.masking import mask_obj, mask_text

CANARY = 'k3y"with\\quotes\nand-é'


def test_plain_and_escaped_forms_are_masked():
    doc = json.dumps({"msg": f"failed with {CANARY}"})
    assert "[m]" in mask_text(doc, [CANARY], "[m]")
    for shown in (doc, repr(CANARY), CANARY):
        assert "quotes" not in mask_text(shown, [CANARY], "[m]")


def test_longest_first_and_short_values_kept():
    assert mask_text("abcdef abc", ["abc", "abcdef"], "*") == "* *"
    assert mask_text("a-b-c", ["a"], "*", min_length=4) == "a-b-c"


def test_nested_objects():
    assert mask_obj({"x": [("s3cret!", 1)], "s3cret!": "k"}, ["s3cret!"], "*") == {"x": [["*", 1]], "*": "k"}
