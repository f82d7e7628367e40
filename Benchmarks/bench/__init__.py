"""The benchmark harness behind Benchmarks/run, one module per concern:

    common      units, the harness's directories, the process groups to kill
                on exit, log() and which()
    scenarios   the scenario table (SCENARIOS) and its goals as data
    tools       the peers: which run, their variant rows, how each is
                installed, built (rangeget) and invoked
    servers     nginx, relay.py, `rangeget serve`, the certificate, the data
                files they serve and what nginx's access logs say
    filesystems the file systems the list scenarios write into (fresh ext4,
                slow-metadata FUSE, the slow-flush shim)
    measure     running one tool: wall, CPU, peak RSS, SHA-256, signals
    runner      Bench: each kind of scenario (download, resume, list, memory)
                run in shuffled rounds
    verified    the verified downloads (Metalink pieces and bad mirrors, a
                damaged .part resumed, Link/Digest headers, the cost of
                piece hashes), mixed into Bench
    adaptive    issue 41: the connection count learned (-n auto against every
                fixed count) and expiring signed URLs, mixed into Bench
    report      tables, goals checked, the results .md and .csv

Python 3 stdlib only."""
