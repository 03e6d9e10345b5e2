"""The toolkit's error classes: one exit status each, the ones README.md documents."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from flagtree_feedstock import errors

ROOT = Path(__file__).resolve().parents[1]


def test_every_error_class_has_its_own_exit_status_and_the_readme_lists_them() -> None:
    classes = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.FeedstockError) and cls is not errors.FeedstockError
    ]
    codes = {cls.__name__: cls.return_code for cls in classes}
    assert len(set(codes.values())) == len(codes), f"two classes share an exit status: {codes}"
    # docs/building.md's table is generated from these classes (tests/test_exit_statuses.py holds it to that).
    table = errors.exit_status_table()
    documented = [int(n) for n in re.findall(r"^\| (\d+) \|", table, flags=re.MULTILINE)]
    assert documented == sorted(codes.values()), (table, codes)
