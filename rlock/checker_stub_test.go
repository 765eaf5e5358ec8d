package rlock_test

func rateKind() *chkKind { return spinKind() }
