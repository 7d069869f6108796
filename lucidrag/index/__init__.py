"""The keyword index: the tokeniser and BM25 over persisted numpy segments."""
