namespace streamvec {}  // replaced by the connectors
