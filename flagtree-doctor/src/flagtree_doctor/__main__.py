from ._entry import doctor

doctor()
