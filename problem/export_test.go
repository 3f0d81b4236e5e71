package problem

// Declared is every code of the table in the order it is declared.
func Declared() []string { return append([]string(nil), declared...) }
