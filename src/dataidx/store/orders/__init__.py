"""Training orders, one of the store's nouns: skip lists of a mixture (``dataidx skip``) and
recorded orders (``dataidx order``). :class:`.records.Orders` owns their tables (:mod:`.tables`)."""
