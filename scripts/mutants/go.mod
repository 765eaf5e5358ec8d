module github.com/relock-go/relock/scripts/mutants

go 1.25.0
