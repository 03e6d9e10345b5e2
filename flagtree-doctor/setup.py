"""The distribution's version is the flagtree-doctor conda package's (flagtree_doctor/_version.py says why).

Built by a recipe, the engine's ``PKG_VERSION`` for the output ``PKG_NAME`` flagtree-doctor; else (a build by
hand, the tests' wheel) the recipe's ``flagtree_version`` in ../recipe/conda_build_config.yaml.
"""

import os
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "src"))

from flagtree_doctor._version import DISTRIBUTION, RECIPE_PINS, recipe_version

built_by_a_recipe = os.environ.get("PKG_NAME") == DISTRIBUTION and os.environ.get("PKG_VERSION")
setup(version=built_by_a_recipe or recipe_version(HERE.parent / RECIPE_PINS))
