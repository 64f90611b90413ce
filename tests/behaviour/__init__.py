"""Behaviour fixtures: what each shipped training setup and a league decide on fixed, seeded
inputs (actions, log-probs, one update's selection and parameter changes), recorded so that a
refactor of the training loop can show it kept them (`tests/test_behaviour_kept.py`).

``python -m tests.behaviour.record`` (from the repository root) rewrites the fixtures in
``tests/behaviour/fixtures/``."""
