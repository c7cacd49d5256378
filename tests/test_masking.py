"""One masking mechanism for every output: plain and escaped forms, longest first, short values kept."""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.masking import mask_obj, mask_text

CANARY = 'k3y"with\\quotes\nand-é'


def test_plain_and_escaped_forms_are_masked():
    doc = json.dumps({"msg": f"failed with {CANARY}"})
    assert "[m]" in mask_text(doc, [CANARY], "[m]")
    for shown in (doc, repr(CANARY), CANARY):
        assert "quotes" not in mask_text(shown, [CANARY], "[m]")


def test_longest_first_and_short_values_kept():
    assert mask_text("abcdef abc", ["abc", "abcdef"], "*", min_length=1) == "* *"
    assert mask_text("a-b-c", ["a"], "*", min_length=4) == "a-b-c"


def test_nested_objects():
    assert mask_obj({"x": [("s3cret!", 1)], "s3cret!": "k"}, ["s3cret!"], "*") == {"x": [["*", 1]], "*": "k"}


# -- secrets too short to be one (issue 19 item 2) ---------------------------------------------------------

def test_a_one_letter_passphrase_never_mangles_a_message():
    from bootstrap.engine.scrubbing import ScrubbingEngine, scrub_exception
    from bootstrap.engine.errors import scrub
    from bootstrap.kit.errors import EngineError
    from bootstrap.records.runs import redact
    from recovery.restoring.report import redact as redact_report

    text = "Fix the cause above; the exit code is 4"
    for short in ("x", "e", "the", "cause"):
        exc = EngineError(text)
        scrub_exception(exc, [short])
        assert exc.message == text and str(exc) == text
        assert scrub(text, [short]) == text and redact(text, [short]) == text
        assert redact_report({"m": text}, [short]) == {"m": text}

    class Failing:
        def up(self):
            raise EngineError(f"{text}: exported x with passphrase s3cr3t-passphrase")

    with pytest.raises(EngineError) as raised:
        ScrubbingEngine(Failing(), lambda: ["x", "s3cr3t-passphrase"]).up()
    assert raised.value.message == f"{text}: exported x with passphrase [secret]"


def test_a_short_passphrase_is_warned_about_when_the_engine_is_built(capsys):
    from bootstrap.kit.masking import MIN_SECRET_LENGTH, short_secret_warning
    from bootstrap.target import Target

    assert short_secret_warning("PULUMI_CONFIG_PASSPHRASE", "correct-horse-battery") is None
    one = short_secret_warning("PULUMI_CONFIG_PASSPHRASE", "x")
    assert "1 character long" in one and "too short to be masked" in one
    assert "is masked in messages" in short_secret_warning("P", "x" * MIN_SECRET_LENGTH)

    spec = type("Spec", (), {"name": "local", "aws": type("Aws", (), {"endpoint_url": None})()})()
    target = Target(spec=spec, endpoint=None, clients=None, store=None,
                    engine_factory=lambda ctx: object(), engine_check=None,
                    environ={"PULUMI_CONFIG_PASSPHRASE": "x"})
    target.engine  # noqa: B018 - building it is what warns
    err = capsys.readouterr().err
    assert "warning: PULUMI_CONFIG_PASSPHRASE is 1 character long" in err
