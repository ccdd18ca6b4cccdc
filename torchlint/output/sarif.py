"""SARIF 2.1.0, as GitHub code scanning accepts it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from torchlint.lint.finding import SYNTAX_ERROR, SYNTAX_ERROR_NAME
from torchlint.lint.rule import all_rules
from torchlint.output.report import Report

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    if absolute.startswith(cwd + os.sep):
        return Path(os.path.relpath(absolute, cwd)).as_posix()
    return Path(absolute).as_uri()


def render(report: Report) -> str:
    from torchlint import __version__

    rules = all_rules()
    codes = list(rules)
    descriptors = [
        {
            "id": code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.explanation},
            "help": {"text": rule.message},
            "helpUri": rule.url(),
            "defaultConfiguration": {"level": "warning" if rule.default_enabled else "note"},
            "properties": {"tags": [rule.family]},
        }
        for code, rule in rules.items()
    ]
    descriptors.insert(
        0,
        {
            "id": SYNTAX_ERROR,
            "name": SYNTAX_ERROR_NAME,
            "shortDescription": {"text": "A file that does not parse: nothing else in it can be checked."},
            "defaultConfiguration": {"level": "error"},
        },
    )
    codes.insert(0, SYNTAX_ERROR)
    results = []
    for result, finding in report.findings():
        entry = {
            "ruleId": finding.code,
            "level": "error" if finding.code == SYNTAX_ERROR else "warning",
            "message": {"text": finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(result.path)},
                        "region": {
                            "startLine": finding.line,
                            "startColumn": finding.column,
                            "endLine": finding.end_line,
                            "endColumn": finding.end_column,
                        },
                    }
                }
            ],
        }
        if finding.code in codes:
            entry["ruleIndex"] = codes.index(finding.code)
        results.append(entry)
    notifications = [
        {
            "level": "error",
            "message": {"text": result.error},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(result.path)}}}],
        }
        for result in report.errors
    ]
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchlint",
                        "version": __version__,
                        "informationUri": "https://pypi.org/project/torchlint/",
                        "rules": descriptors,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
