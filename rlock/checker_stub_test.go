package rlock_test

func countingKind() *chkKind { return spinKind() }
func rateKind() *chkKind     { return spinKind() }
