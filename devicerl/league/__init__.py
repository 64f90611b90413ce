"""League: many named policies sharing one device fleet.

Specialists per task cluster, a generalist, frozen snapshots (regression gates and teachers),
frontier task sampling and population-based training. This package holds the league's state and
rules, torch-light and free of process code; `devicerl.runtime.loop.league` plugs it into the
training loop as an observer (``docs/league.md``).

- `devicerl.league.config`: `PolicySpec`, `LeagueConfig`, `PBTConfig` (YAML ``policies:``).
- `devicerl.league.mapping`: `PolicyMapping`, which policy plays a new episode.
- `devicerl.league.success`: `SuccessTable`, windowed success per policy and task.
- `devicerl.league.frontier`: `FrontierSampler`, tasks weighted x(1-x) + floor.
- `devicerl.league.state`: `League`, policies added/removed, frozen snapshots, regression gate.
- `devicerl.league.pbt`: `PBT`, exploit/perturb over a population.
- `devicerl.league.persist`: save/load (JSON + safetensors) that survives kill -9.
- `devicerl.league.table`: `league_table`, the text report.
"""
