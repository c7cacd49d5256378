"""Reading a state: the bytes of one state version (decompressed, bounded), its model and fast parse, and the
URN grammar. Every other recovery step enters here: state_bytes, state_parse (→ state_model), urns."""
