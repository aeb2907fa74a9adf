namespace streamvec {}  // replaced by the REST server
