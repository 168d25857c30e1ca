"""docs/failures.md is backed by tests: every row names one that exists, every CLI case has a row."""

import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
TABLE = REPO / "docs" / "failures.md"
TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[([^\]]+)\])?`")


def table_rows():
    rows = []
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 5 and cells[0].isdigit():
            rows.append(cells)
    return rows


def _defined(path):
    tree = ast.parse(path.read_text())
    functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return functions, constants | names


def test_the_table_has_fifty_rows_each_with_a_test():
    rows = table_rows()
    assert len(rows) >= 50, len(rows)
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1)), "rows are numbered 1..N"
    for row in rows:
        ids = TEST_ID.findall(row[-1])
        assert ids, f"row {row[0]} names no test: {row[-1]}"
        for file, function, param in ids:
            path = REPO / file
            assert path.is_file(), f"row {row[0]}: {file} does not exist"
            functions, constants = _defined(path)
            assert function in functions, f"row {row[0]}: {file} has no {function}"
            if param:
                parts = [param] if param in constants else param.split("-")
                assert all(p in constants for p in parts), f"row {row[0]}: {function}[{param}] is not a case"


def _cli_cases():
    """`{test function: {case id: exit code}}` of the CLI case tables."""
    from tests.failures import test_cli_failures, test_probe_failures

    return {
        "test_cli_failure": {c[0]: c[2] for c in test_cli_failures.CASES},
        "test_probe_failure": {c[0]: c[2] for c in test_probe_failures.CASES},
    }


def test_every_cli_case_is_in_the_table():
    text = TABLE.read_text()
    missing = [case for function, cases in _cli_cases().items() for case in cases if f"{function}[{case}]" not in text]
    assert not missing, f"cases without a row in docs/failures.md: {missing}"


def test_documented_exit_codes_match_the_cases():
    tables = _cli_cases()
    for row in table_rows():
        for _, function, param in TEST_ID.findall(row[-1]):
            if function in tables:
                codes = tables[function]
                assert row[-2] == str(codes[param]), (
                    f"row {row[0]}: exit code {row[-2]}, the test expects {codes[param]}"
                )
