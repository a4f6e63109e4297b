"""A user's own gymnasium environment package: importing it registers `tandem_corridor/Corridor-v0`,
`tandem_corridor/Dials-v0` and `tandem_corridor/Lamps-v0`.

tandem imports it first when an experiment lists it under `import`, so the id resolves in
every worker process.
"""

from gymnasium.envs.registration import register

register(
    id="tandem_corridor/Corridor-v0",
    entry_point="tandem_corridor.corridor:Corridor",
    max_episode_steps=50,
)

register(
    id="tandem_corridor/Dials-v0",
    entry_point="tandem_corridor.dials:Dials",
    max_episode_steps=20,
)

register(
    id="tandem_corridor/Lamps-v0",
    entry_point="tandem_corridor.lamps:Lamps",
)
