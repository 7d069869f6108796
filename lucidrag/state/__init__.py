"""A knowledge base's state and its plugin storage: records, journal, index snapshot, deletion."""
