"""League runs: the trainer of a multi-policy run (`trainer`), per-policy acting copies and task
assignment (`acting`), per-policy replay and learners (`learning`) and learner shards on Ray
(`shards`). The league's own state (members, snapshots, frontier, PBT) is `devicerl.league`."""
