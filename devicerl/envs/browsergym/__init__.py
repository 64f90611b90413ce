"""BrowserGym tasks as devices, run in BrowserGym's own environment (`env.BrowserGymEnv`).

``remote.py`` runs over there and imports nothing from devicerl; everything else runs here.
"""
