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
    readme = " ".join((ROOT / "docs" / "building.md").read_text().split())
    listed = readme.split("with a distinct exit status: ", 1)[1].split(". ", 1)[0]
    documented = [int(n) for n in re.findall(r"(?:^|, )(\d+) ", listed)]
    assert documented == sorted(codes.values()), (listed, codes)
