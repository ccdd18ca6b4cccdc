"""TL001 unused-noqa."""

from __future__ import annotations

from torchlint.lint.rule import FixSafety, Rule


class UnusedNoqa(Rule):
    """Reported by the engine itself, which knows which directives silenced something."""

    code = "TL001"
    name = "unused-noqa"
    family = "Suppressions"
    summary = "A `# noqa: TL...` directive that silences nothing on its line."
    message = "Unused `noqa` directive: nothing is reported here; remove it"
    explanation = (
        "A suppression that no longer silences anything hides the next real finding on that line, "
        "and tells readers a problem exists where none does. Only torchlint's own `TL` codes are "
        "checked; codes of other tools in the same comment are left alone."
    )
    bad = "loader = DataLoader(ds, num_workers=4)  # noqa: TL101\n"
    good = "loader = DataLoader(ds, num_workers=4)\n"
    false_positives = (
        "The directive may be for a rule that is deselected in this run only (for example in an editor "
        "integration that runs a subset): only directives naming selected rules are reported."
    )
    fix_safety = FixSafety.SAFE
    fix_notes = "Removes the unused codes, or the whole directive when none is left."
