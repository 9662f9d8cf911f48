"""Packing plans, one of the store's nouns (``dataidx pack``): a plan of a mixture under a render
spec, its packs per epoch and their members. :class:`.records.Plans` owns their tables (:mod:`.tables`)."""
