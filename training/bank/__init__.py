"""The statement bank: families of statements with wordings and negations, its question split, and how
well an S1 reads its statements."""
