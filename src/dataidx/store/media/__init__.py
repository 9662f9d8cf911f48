"""Media, one of the store's nouns: the distinct media files a build's rows name (kind, place,
size, digest, header) and each row's media in order. :class:`.records.Media` owns their tables
(:mod:`.tables`)."""
