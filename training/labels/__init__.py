"""Labels of S1 states: the readers' label files (one pipeline for the paper monitors and the statement
bank), the rule labels, labelled examples and (state, statement) pairs as text, adapter label files."""
