module kai-scale-pipeline/pprof-fixture

go 1.22
