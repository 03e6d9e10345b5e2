from flagtree_doctor._entry import verify

verify()
