#!/usr/bin/python3
"""Fails when a Catch2 TEST_CASE name would not run under ctest: catch_discover_tests registers
each name as a CMake list item, so a ';' splits it into two ctest tests whose filters match no test
case (Catch then runs nothing and exits 0: 26 cases silently never ran in CI until 2026-11-30), and
a name starting with '-' reaches Catch as an option. Usage: check_test_names.py TESTS_DIR
"""
import pathlib
import re
import sys

NAME = re.compile(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"')


def main():
    bad = []
    for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.cpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in NAME.finditer(text):
            name = match.group(1)
            line = text.count("\n", 0, match.start()) + 1
            if ";" in name:
                bad.append(f"{path}:{line}: ';' in test name (ctest splits it): {name}")
            if name.startswith("-") or name.startswith(" "):
                bad.append(f"{path}:{line}: test name starts with '{name[0]}': {name}")
    for b in bad:
        print(b)
    print(f"check_test_names: {len(bad)} bad test name(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
