"""tandem's gymnasium worker: owns a contiguous share of one rank's environments.

With "kind": "pettingzoo" each environment is a PettingZoo Parallel environment
(`<module>.<function>(**make_args)`) of several agents, seen through `Parallel` as one
environment whose observation, reward, flags and info are lists in `possible_agents` order;
its observation row is every agent's encoded observation, agent after agent, and its action,
reward and flag rows hold one entry per agent. An agent that leaves before the others is
absent until the game ends: the worker writes its last observation into the "final" row at the
step it leaves at, zeros (and an all-legal mask) as its observation, no reward or flags, and
marks it in "left"; its action is not passed on. With "api": "aec" it is an AEC environment seen
through `Turns`: one agent moves a step, and the worker writes whose turn it is ("turn").

tandem (crates/tandem-env/src/gym) starts this file with `<python> -c`. Observations,
actions, rewards and flags live in a shared-memory file both sides map; the pipes carry
one short line per request. Protocol (all lines end in a newline):

  stdin, first line:   JSON {"kind", "id", "module", "function", "imports", "make_args", "render",
                             "action_mask", "api", "info_keys", "lo", "hi"}
  reply:               JSON {"hello": ...} (interpreter, versions, spaces) or {"error": ...}
  stdin, second line:  JSON {"shm": path, "size": bytes, "n": envs, "agents": per env, "offsets": {...}}
  reply:               "k" or {"error": ...}
  then, repeatedly:    "s LO HI"  step the environments LO..HI of this worker's share
                       "r I SEED I - ..."  reset environment I with SEED ("-": unseeded)
  reply:               "k" or {"error": ...}
                       "f I"  draw environment I (only when made with "render": true)
  reply:               {"frame": {"height", "width", "hex"}} (uint8 RGB, row-major) or {"error": ...}
  end of stdin:        close the environments and exit.

The reply channel is the original stdout; sys.stdout (and fd 1, for C libraries) is
pointed at stderr so that prints cannot corrupt the protocol.
"""

import json
import os
import signal
import sys
import traceback

REPLY_FD = os.dup(1)
os.dup2(2, 1)
sys.stdout = sys.stderr
# tandem decides what Ctrl-C does; the worker just goes on until its stdin closes.
signal.signal(signal.SIGINT, signal.SIG_IGN)


def die_with_parent():
    # A rank killed from outside cannot close our stdin while a user's step runs long;
    # Linux's parent-death signal ends the worker with it (the signal follows the thread
    # that started us, which is the one that owns the environments).
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: closing stdin still stops the worker between requests
    if str(os.getppid()) != os.environ.get("TANDEM_GYM_PARENT", str(os.getppid())):
        os._exit(1)  # the parent died before the signal was armed


die_with_parent()


def reply(obj):
    data = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(REPLY_FD, data):]


def error(kind, **fields):
    fields["error"] = kind
    reply(fields)


def bounds(values, np):
    # JSON has no infinities: an unbounded side is null.
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return [float(v) if np.isfinite(v) else None for v in flat]


def describe(space, np):
    """The space as tandem reads it; anything tandem cannot take is reported by name."""
    name = type(space).__name__
    if name == "Box":
        return {
            "kind": "box",
            "dtype": np.dtype(space.dtype).name,
            "shape": list(space.shape),
            "low": bounds(space.low, np),
            "high": bounds(space.high, np),
            "repr": repr(space),
        }
    if name == "Discrete":
        return {"kind": "discrete", "n": int(space.n), "start": int(space.start), "repr": repr(space)}
    if name == "MultiDiscrete" and len(space.shape) == 1:
        nvec = [int(n) for n in space.nvec]
        return {"kind": "multi-discrete", "nvec": nvec, "start": [int(s) for s in space.start], "repr": repr(space)}
    if name == "MultiBinary" and len(space.shape) == 1:
        return {"kind": "multi-binary", "n": int(space.shape[0]), "repr": repr(space)}
    return {"kind": "other", "type": name, "repr": repr(space)}


# How an image entry is encoded; the one image of a structured observation leads its row.
IMAGE = "pixels, channels first"


class Unencodable(Exception):
    """An observation entry tandem's flat vector cannot hold, with why and what to do."""


def is_image(space, np):
    # SB3's MultiInputPolicy reads uint8 boxes of two or three dimensions as images too.
    return np.dtype(space.dtype) == np.uint8 and len(space.shape) in (2, 3)


def entries(space, np, path):
    """The entries of a structured observation space in the order the space lists them:
    (path, space, how, length, encode), where encode(value) gives length float32 values.
    Discrete values become one-hot, MultiDiscrete one-hot per component, MultiBinary and
    vector boxes their values, an image (a uint8 box of 2 or 3 dimensions) its pixels
    channels first; Dict entries (in the space's key order) and Tuple entries follow one
    another."""
    name = type(space).__name__
    where = f"`{path}`" if path else "the observation"
    if name == "Dict":
        return [e for key, sub in space.spaces.items() for e in entries(sub, np, f"{path}.{key}" if path else str(key))]
    if name == "Tuple":
        return [e for i, sub in enumerate(space.spaces) for e in entries(sub, np, f"{path}[{i}]")]
    if name == "Discrete":
        return [(path, space, "one-hot", int(space.n), one_hot(np, [int(space.n)], [int(space.start)], where))]
    if name == "MultiDiscrete":
        nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        start = [int(s) for s in np.asarray(space.start).reshape(-1)]
        return [(path, space, "one-hot per component", sum(nvec), one_hot(np, nvec, start, where))]
    if name == "MultiBinary":
        n = int(np.prod(space.shape))
        return [(path, space, "0/1 values", n, values(np, n))]
    if name == "Box" and is_image(space, np):
        return [(path, space, IMAGE, int(np.prod(space.shape)), image(np, space.shape))]
    if name == "Box" and (np.issubdtype(space.dtype, np.floating) or np.issubdtype(space.dtype, np.integer)):
        n = int(np.prod(space.shape))
        return [(path, space, "values", n, values(np, n))]
    raise Unencodable(
        f"{where} is a {name} space ({space!r}); tandem encodes Box, Discrete, MultiDiscrete, "
        "MultiBinary, and Dict and Tuple of them"
    )


def image(np, shape):
    height, width = shape[0], shape[1]
    channels = shape[2] if len(shape) == 3 else 1

    def encode(x):
        pixels = np.asarray(x, dtype=np.uint8).reshape(height, width, channels)
        return pixels.transpose(2, 0, 1).astype(np.float32).reshape(-1)

    return encode


def values(np, n):
    def encode(x):
        return np.asarray(x, dtype=np.float32).reshape(n)

    return encode


def one_hot(np, nvec, start, where):
    offsets = np.cumsum([0] + nvec[:-1])
    starts, sizes = np.asarray(start), np.asarray(nvec)

    def encode(x):
        index = np.asarray(x, dtype=np.int64).reshape(-1) - starts
        if index.shape != sizes.shape or np.any(index < 0) or np.any(index >= sizes):
            raise ValueError(f"{where} is {x!r}, outside its space (sizes {nvec}, starting at {start})")
        out = np.zeros(sum(nvec), dtype=np.float32)
        out[offsets + index] = 1.0
        return out

    return encode


def describe_obs(space, np, mask="none", act=None):
    """A Box as it is; any other space as the flat float32 vector of its encoded entries,
    with the encoder the worker writes it through, encode(obs, info). With an action mask
    (`mask` "info" or "observation", for the actions `act` describes) the observation is
    always encoded, the mask follows it as its last entries, and the description says how
    many ("mask")."""
    if mask != "none":
        return describe_masked(space, np, mask, act)
    if type(space).__name__ == "Box":
        return describe(space, np), None
    try:
        parts = entries(space, np, "")
    except Unencodable as e:
        return refused(space, str(e)), None
    return encoded(space, np, parts, lambda obs, info: obs, None)


def refused(space, why):
    return {"kind": "other", "type": type(space).__name__, "repr": repr(space), "why": why}


def encoded(space, np, parts, features, mask=None):
    """The description and encoder of `parts` (the entries of `space`, read from an
    observation by `features(obs, info)`), then, with a `Mask`, the mask."""
    images = [i for i, part in enumerate(parts) if is_image_part(part)]
    if len(images) > 1:
        named = ", ".join(f"`{parts[i][0]}`" for i in images)
        why = (
            f"it holds {len(images)} images ({named}); tandem takes one image beside vectors: "
            "stack them into one image entry in your environment, or observe one of them"
        )
        return refused(space, why), None
    # The image, if any, leads the row: the image networks read it there.
    order = images + [i for i in range(len(parts)) if i not in images]
    encoders = [parts[i][-1] for i in order]

    def encode(obs, info):
        given = list(leaves(space, features(obs, info)))
        values = [e(given[i]) for e, i in zip(encoders, order)]
        if mask is not None:
            values.append(mask.values(obs, info))
        return values[0] if len(values) == 1 else np.concatenate(values)

    listed = [{"path": p, "space": repr(s), "how": how, "len": length} for p, s, how, length, _ in (parts[i] for i in order)]
    if mask is not None:
        listed.append({"path": "action mask", "space": mask.source, "how": "0/1 values", "len": mask.size})
    total = sum(entry["len"] for entry in listed)
    description = {"kind": "encoded", "dtype": "float32", "shape": [total], "entries": listed, "repr": repr(space)}
    if images:
        shape = parts[images[0]][1].shape
        description["image"] = {
            "height": int(shape[0]),
            "width": int(shape[1]),
            "channels": int(shape[2]) if len(shape) == 3 else 1,
        }
    return dict(description, mask=0 if mask is None else mask.size), encode


def is_image_part(part):
    return part[2] == IMAGE


def mask_components(act):
    """The number of actions of each component a mask covers, read from the action space's
    description; None for actions a mask cannot cover (boxes, and those tandem refuses)."""
    if act["kind"] == "discrete":
        return [act["n"]]
    if act["kind"] == "multi-discrete":
        return act["nvec"]
    if act["kind"] == "multi-binary":
        return [2] * act["n"]
    return None


def describe_masked(space, np, mask, act):
    components = mask_components(act)
    if components is None:
        # Reported by tandem with the action space (check_mask in gym/mod.rs).
        return describe_obs(space, np)
    if mask == "observation":
        if type(space).__name__ != "Dict" or "action_mask" not in space.spaces:
            why = 'action-mask "observation" reads the `action_mask` entry of a Dict observation, and this observation has none'
            return refused(space, why), None
        import gymnasium

        space = gymnasium.spaces.Dict({k: v for k, v in space.spaces.items() if k != "action_mask"})
        features = lambda obs, info: {k: v for k, v in obs.items() if k != "action_mask"}
        source, read = "observation['action_mask']", lambda obs, info: obs["action_mask"]
    else:
        features = lambda obs, info: obs
        source, read = "info['action_mask']", lambda obs, info: info.get("action_mask") if isinstance(info, dict) else None
    if type(space).__name__ == "Box" and is_image(space, np):
        why = f"an action mask follows the observation as its last entries, so the observation must be a vector; this one is an image ({space!r})"
        return refused(space, why), None
    try:
        parts = entries(space, np, "")
    except Unencodable as e:
        return refused(space, str(e)), None
    return encoded(space, np, parts, features, Mask(np, components, source, read))


class Mask:
    """An action mask of `size` entries, one per action of each component, read from each
    reset and step by read(obs, info) and checked: 0/1, at least one valid action in each
    component. `source` names where it comes from, for the log and the errors."""

    def __init__(self, np, components, source, read):
        self.np, self.components, self.source, self.read = np, components, source, read
        self.size = sum(components)
        self.bounds = np.cumsum([0] + components)

    def values(self, obs, info):
        np, source = self.np, self.source
        given = self.read(obs, info)
        if given is None:
            raise ValueError(f"the environment gave no {source} (the experiment's action-mask says it does)")
        m = np.asarray(given).reshape(-1)
        if m.shape[0] != self.size or not np.all((m == 0) | (m == 1)):
            raise ValueError(f"{source} must hold {self.size} values, each 0 or 1; it is {given!r}")
        for k in range(len(self.components)):
            if not m[self.bounds[k]:self.bounds[k + 1]].any():
                which = f"component {k}" if len(self.components) > 1 else "the action"
                raise ValueError(f"{source} leaves {which} no valid action: {given!r}")
        return m.astype(np.float32)


class BadObservation(Exception):
    """An observation that lacks what its declared space holds, with where."""


def leaves(space, x, path=""):
    """The values of a Dict or Tuple observation in the order `entries` lists their spaces; an
    entry the space declares and the observation lacks is a `BadObservation` naming it."""
    name = type(space).__name__
    where = f"`{path}`" if path else "the observation"
    if name == "Dict":
        if not isinstance(x, dict):
            raise BadObservation(f"{where} is {type(x).__name__}, where its space is a Dict ({space!r})")
        for key, sub in space.spaces.items():
            if key not in x:
                keys = ", ".join(f"`{k}`" for k in x) or "none"
                raise BadObservation(
                    f"{where} has no entry `{key}`, which its space declares ({space!r}); its entries: {keys}"
                )
            yield from leaves(sub, x[key], f"{path}.{key}" if path else str(key))
    elif name == "Tuple":
        if len(x) != len(space.spaces):
            raise BadObservation(f"{where} has {len(x)} entries, where its space declares {len(space.spaces)} ({space!r})")
        for i, (sub, v) in enumerate(zip(space.spaces, x)):
            yield from leaves(sub, v, f"{path}[{i}]")
    else:
        yield x


# What a machine needs for MuJoCo to draw offscreen, for the render error.
GL_HELP = (
    "MuJoCo draws offscreen through MUJOCO_GL=egl (tandem's default when rendering; Debian: "
    "apt-get install libegl1 libegl-mesa0 libopengl0 libgl1-mesa-dri) or MUJOCO_GL=osmesa "
    "(apt-get install libosmesa6); see docs/environments.md"
)


class BadAgents(Exception):
    """Agents that break tandem's rules for a PettingZoo game, with the agent and the step:
    possible_agents that change, an agent in the game that the environment gives no entry for,
    one gone from `agents` without its flag set, or one that leaves an AEC game early."""


class Parallel:
    """A PettingZoo Parallel environment seen as one environment whose observation, reward,
    terminated, truncated and info are lists, one entry per agent in `possible_agents` order.

    An agent may leave before the others: its flags set while others play on. From then until
    the game ends it is absent (`left`): its action is not passed to the environment, and its
    entries are None (its observation, which the encoder writes as zeros and an all-legal
    mask), reward 0 and flags unset. The game is `over` when every agent has left or is done;
    after a step that made agents leave, `last` holds every agent's observation with the
    leavers' last ones (None where the environment gave none)."""

    def __init__(self, env):
        self.env = env
        self.names = list(env.possible_agents)
        self.steps = 0
        self.left = [False] * len(self.names)
        self.over = False
        self.last = None

    def spaces(self):
        return [(self.env.observation_space(a), self.env.action_space(a)) for a in self.names]

    def check_possible(self, when):
        now = list(self.env.possible_agents)
        if now != self.names:
            raise BadAgents(f"its possible_agents changed {when}: {self.names} became {now}; tandem needs the same agents in every game")

    def reset(self, seed=None):
        obs, infos = self.env.reset(seed=seed)
        self.steps = 0
        self.left = [False] * len(self.names)
        self.over, self.last = False, None
        self.check_possible("at a reset")
        missing = [a for a in self.names if not isinstance(obs, dict) or a not in obs]
        if missing:
            raise BadAgents(
                f"agent `{missing[0]}` has no observation at a reset; every agent of possible_agents starts each game"
            )
        infos = infos if isinstance(infos, dict) else {}
        return [obs[a] for a in self.names], [infos.get(a, {}) for a in self.names]

    def seed_actions(self, seed):
        for a in self.names:
            self.env.action_space(a).seed(seed)

    def step(self, actions):
        # PettingZoo refuses actions of agents that are no longer in the game.
        given = {a: act for a, act, away in zip(self.names, actions, self.left) if not away}
        obs, rew, term, trunc, infos = self.env.step(given)
        self.steps += 1
        when = f"at step {self.steps} of its episode"
        self.check_possible(when)
        rew = self.of_playing(rew, "reward", when, 0.0, float)
        term = self.of_playing(term, "termination", when, False, bool)
        trunc = self.of_playing(trunc, "truncation", when, False, bool)
        done = [t or u for t, u in zip(term, trunc)]
        # An agent that leaves may do so without a last observation.
        obs = self.of_playing(obs, "observation", when, None, lambda o: o, excused=done)
        self.check_gone(done, when)
        infos = infos if isinstance(infos, dict) else {}
        infos = [{} if away else infos.get(a, {}) for a, away in zip(self.names, self.left)]
        self.over = all(d or away for d, away in zip(done, self.left))
        self.last = obs if any(done) and not self.over else None
        self.left = [d or away for d, away in zip(done, self.left)]
        now = obs if self.over else [None if away else o for o, away in zip(obs, self.left)]
        return now, rew, term, trunc, infos

    def of_playing(self, given, what, when, absent, cast, excused=None):
        """Each agent's entry of the dict `given`, cast; `absent` for an agent that has left,
        or that `excused` (a flag per agent) lets go without one. An agent in the game without
        one is named."""
        given = given if isinstance(given, dict) else {}
        entries = []
        for j, (a, away) in enumerate(zip(self.names, self.left)):
            if away or (a not in given and excused and excused[j]):
                entries.append(absent)
            elif a not in given:
                raise BadAgents(f"agent `{a}` is in the game {when}, and the environment gave no {what} for it")
            else:
                entries.append(cast(given[a]))
        return entries

    def check_gone(self, done, when):
        live = set(getattr(self.env, "agents", self.names))
        gone = [a for a, d, away in zip(self.names, done, self.left) if a not in live and not (d or away)]
        if gone:
            raise BadAgents(
                f"agent `{gone[0]}` left {when} without being terminated or truncated (it is gone from `agents` "
                "and its flags are unset); an agent that leaves sets its termination or truncation at the step it leaves"
            )

    def close(self):
        self.env.close()


# An AEC agent that is done is selected once more, for a step with action None before it is
# removed (PettingZoo's dead step); `Turns` does not take those yet.
AEC_DEPARTURES = (
    "tandem's AEC games end for every agent at once (agents that leave before the others are not supported yet "
    'with api "aec"; a Parallel environment\'s may leave)'
)


class Turns(Parallel):
    """A PettingZoo AEC environment, whose agents take turns, seen as `Parallel` sees a
    Parallel one: on each step the agent whose turn it is (`agent_selection`; `turn`, its
    index) plays its entry of the actions and the others' entries are not played. Every
    agent's observation, reward and flags are read after each move (`observe`, `rewards`,
    `terminations`, `truncations`, `infos`). With an action mask (`mask`, the experiment's
    action-mask), an agent waiting for its turn, and every agent once the game is over, is
    shown every action as legal (its row's action is not played, and the mask a waiting agent
    is given often allows nothing), and a move the mover's own mask forbids is an
    `IllegalMove`."""

    def __init__(self, env, np, mask):
        super().__init__(env)
        self.np, self.mask = np, mask
        self.turn = 0
        self.given = ([], [])

    def observed(self, when, over=False):
        """Every agent's observation and info, as `Parallel` lists them, and whose turn it is."""
        live = getattr(self.env, "agents", self.names)
        gone = [a for a in self.names if a not in live]
        if gone:
            raise BadAgents(f"agent `{gone[0]}` left {when} while others played on; {AEC_DEPARTURES}")
        obs = [self.env.observe(a) for a in self.names]
        infos = self.env.infos if isinstance(self.env.infos, dict) else {}
        infos = [infos.get(a, {}) for a in self.names]
        self.given = (obs, infos)
        if not over:
            self.turn = self.names.index(self.env.agent_selection)
        mover = None if over else self.turn
        return self.shown(obs, infos, mover)

    def shown(self, obs, infos, mover):
        if self.mask == "none":
            return obs, infos
        shown_obs, shown_infos = [], []
        for j, (o, i) in enumerate(zip(obs, infos)):
            if j != mover:
                if self.mask == "observation" and isinstance(o, dict) and "action_mask" in o:
                    o = dict(o, action_mask=self.np.ones_like(o["action_mask"]))
                if self.mask == "info" and isinstance(i, dict) and "action_mask" in i:
                    i = dict(i, action_mask=self.np.ones_like(i["action_mask"]))
            shown_obs.append(o)
            shown_infos.append(i)
        return shown_obs, shown_infos

    def reset(self, seed=None):
        self.env.reset(seed=seed)
        self.steps, self.over = 0, False
        self.check_possible("at a reset")
        return self.observed("at a reset")

    def check_legal(self, action):
        if self.mask == "none" or not isinstance(action, int):
            return
        obs, infos = self.given
        o, i = obs[self.turn], infos[self.turn]
        if self.mask == "observation":
            m = o.get("action_mask") if isinstance(o, dict) else None
        else:
            m = i.get("action_mask") if isinstance(i, dict) else None
        if m is not None and not (0 <= action < len(m) and m[action]):
            legal = [k for k in range(len(m)) if m[k]]
            raise IllegalMove(
                f"agent `{self.names[self.turn]}` played action {action} at step {self.steps + 1} of its episode, which its "
                f"action mask forbids (legal: {legal})"
            )

    def step(self, actions):
        action = actions[self.turn]
        self.check_legal(action)
        self.env.step(action)
        self.steps += 1
        when = f"at step {self.steps} of its episode"
        self.check_possible(when)
        rew = self.of_playing(self.env.rewards, "reward", when, 0.0, float)
        term = self.of_playing(self.env.terminations, "termination", when, False, bool)
        trunc = self.of_playing(self.env.truncations, "truncation", when, False, bool)
        done = [t or u for t, u in zip(term, trunc)]
        if any(done) and not all(done):
            left = [a for a, d in zip(self.names, done) if d]
            raise BadAgents(f"agent `{left[0]}` left {when} while others played on; {AEC_DEPARTURES}")
        self.over = all(done)
        obs, infos = self.observed(when, over=self.over)
        return obs, rew, term, trunc, infos


class IllegalMove(Exception):
    """A move the mover's action mask forbids."""


def describe_agents(env, np, mask):
    """Each agent's spaces as tandem reads them, and the game's observation: every agent's
    float32 vector (a Box flattened, anything else encoded as for gymnasium) agent after
    agent, with the encoder of the whole list."""
    agents, encoders, absent, entries = [], [], [], []
    for name, (obs_space, act_space) in zip(env.names, env.spaces()):
        act = describe(act_space, np)
        obs, encode = describe_obs(obs_space, np, mask, act)
        if (obs["kind"] == "box" and is_image(obs_space, np)) or "image" in obs:
            obs = refused(obs_space, "a pettingzoo agent's observation must be a vector (images are not supported yet)")
        if obs["kind"] in ("box", "encoded"):
            n = int(np.prod(obs["shape"]))
            encode = encode or (lambda o, i, n=n: np.asarray(o, dtype=np.float32).reshape(n))
            entries.append({"path": name, "space": repr(obs_space), "how": "values" if obs["kind"] == "box" else "encoded", "len": n})
            absent.append(absent_row(np, n, obs.get("mask", 0)))
        else:
            absent.append(None)
        agents.append({"name": name, "obs": obs, "action": act})
        encoders.append(encode)

    def encode(obs, info):
        # None: an agent not in the game (Parallel's), written as its absent row.
        rows = [a if o is None else e(o, i) for e, a, o, i in zip(encoders, absent, obs, info)]
        return np.concatenate(rows)

    total = sum(e["len"] for e in entries)
    game = {"kind": "encoded", "dtype": "float32", "shape": [total], "entries": entries, "repr": f"{len(agents)} agents", "mask": 0}
    return agents, game, encode


def absent_row(np, n, mask):
    """The observation of an agent that has left its game: zeros, and where an action mask
    ends the row, every action legal (a policy's masked choice needs one, as for an agent
    waiting for its turn)."""
    row = np.zeros(n, dtype=np.float32)
    row[n - mask :] = 1.0
    return row


def checked_api(env, turns, np, mask, function):
    """`env` seen through `Turns` (the experiment's api "aec") or `Parallel`; an environment of
    the other API is refused with the setting to change."""
    # AEC environments (and their wrappers) iterate their agents; Parallel ones do not. The
    # class is asked: an AEC wrapper refuses `agent_selection` before the first reset.
    aec = callable(getattr(type(env), "agent_iter", None))
    if turns and not aec:
        raise TypeError(
            f"`{function}` built {type(env).__name__}, which has no `agent_iter`: it is not an AEC environment. "
            'Write `api "parallel"` for a Parallel environment, or name the module\'s AEC function (`function "env"`)'
        )
    if not turns and aec:
        raise TypeError(
            f"`{function}` built {type(env).__name__}, an AEC environment whose agents take turns (it has `agent_iter`). "
            'Write `api "aec"` for it, or name the module\'s Parallel function (`function "parallel_env"`)'
        )
    return Turns(env, np, mask) if turns else Parallel(env)


def pettingzoo_version():
    try:
        from importlib.metadata import version

        return version("pettingzoo")
    except Exception:
        return "(version unknown)"


def start(config):
    if config["render"]:
        # Before anything imports mujoco, which reads it once. EGL needs no display.
        os.environ.setdefault("MUJOCO_GL", "egl")
        # pygame (classic control) draws rgb_array frames without a window.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        import gymnasium
        import numpy as np
    except Exception as e:
        error(
            "gymnasium",
            message=f"{type(e).__name__}: {e}",
            python=sys.executable,
            python_version=sys.version.split()[0],
        )
        return None
    import importlib

    for module in config["imports"]:
        try:
            importlib.import_module(module)
        except Exception:
            error("import", module=module, traceback=traceback.format_exc())
            return None
    kwargs = dict(config["make_args"])
    if config["render"]:
        kwargs["render_mode"] = "rgb_array"
    zoo = config["kind"] == "pettingzoo"
    if zoo:
        try:
            module = importlib.import_module(config["module"])
        except Exception:
            error("import", module=config["module"], traceback=traceback.format_exc())
            return None
        factory = getattr(module, config["function"], None)
        if not callable(factory):
            message = f"module `{config['module']}` has no function `{config['function']}` (PettingZoo's environments expose `parallel_env`)"
            error("make", env=config["lo"], message=message, traceback="")
            return None
        turns = config["api"] == "aec"
        mask = config["action_mask"]
        make = lambda: checked_api(factory(**kwargs), turns, np, mask, config["function"])
    else:
        make = lambda: gymnasium.make(config["id"], **kwargs)
    envs = []
    for i in range(config["lo"], config["hi"]):
        try:
            envs.append(make())
        except Exception as e:
            why = " (made with render_mode='rgb_array' to draw it)" if config["render"] else ""
            error("make", env=i, message=f"{type(e).__name__}: {e}{why}", traceback=traceback.format_exc())
            return None
    if zoo:
        agents, obs, encode = describe_agents(envs[0], np, config["action_mask"])
        act = agents[0]["action"] if agents else {"kind": "other", "repr": "no agents"}
        spaces = lambda env: (env.names, env.spaces())
    else:
        agents = None
        act = describe(envs[0].action_space, np)
        obs, encode = describe_obs(envs[0].observation_space, np, config["action_mask"], act)
        spaces = lambda env: (env.observation_space, env.action_space)
    for k, env in enumerate(envs[1:], config["lo"] + 1):
        if spaces(env) != spaces(envs[0]):
            error("make", env=k, message="its agents or spaces differ from the first environment's", traceback="")
            return None
    reply(
        {
            "hello": True,
            "agents": agents,
            "pid": os.getpid(),
            "python": sys.executable,
            "python_version": sys.version.split()[0],
            "gymnasium": gymnasium.__version__,
            "pettingzoo": pettingzoo_version() if zoo else None,
            "numpy": np.__version__,
            "obs": obs,
            "action": act,
        }
    )
    return np, envs, obs, act, encode


class BadInfo(Exception):
    """An info value of the experiment's `info-keys` that tandem cannot log, with the key."""


def info_value(np, info, key):
    """info[key] as a finite float; NaN when the key is missing (the values written are
    finite, so NaN says "absent" unambiguously: tandem refuses it at an episode's end only,
    as many environments put `is_success` in the last step's info alone)."""
    if not isinstance(info, dict) or key not in info:
        return float("nan")
    v = info[key]
    numeric = isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))
    if isinstance(v, np.ndarray) and v.size == 1 and v.dtype.kind in "biuf":
        numeric, v = True, v.reshape(-1)[0]
    if not numeric:
        raise BadInfo(f"info[{key!r}] is {v!r} (a {type(v).__name__}); info-keys logs numbers and booleans")
    try:
        x = float(v)
    except OverflowError:
        x = float("inf")
    if x != x or x in (float("inf"), float("-inf")):
        raise BadInfo(f"info[{key!r}] is {v!r}, not a finite number; tandem cannot average it")
    return x


class Batch:
    """numpy views of the shared-memory file (see crates/tandem-env/src/gym/shm.rs)."""

    def __init__(self, np, layout, obs, act, encode, info_keys):
        import mmap

        # None for a Box, written as it is; else what turns an observation into tandem's vector.
        self.encode = encode
        fd = os.open(layout["shm"], os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, layout["size"])
        finally:
            os.close(fd)
        n, off = layout["n"], layout["offsets"]
        # A game of several agents has one action, reward and flag per agent; gymnasium's one.
        self.agents = layout.get("agents")
        rows = n * (self.agents or 1)
        per = [n] if self.agents is None else [n, self.agents]

        def view(name, dtype, shape):
            count = int(np.prod(shape, dtype=np.int64))
            return np.frombuffer(self.mm, dtype=dtype, count=count, offset=off[name]).reshape(shape)

        obs_dtype = np.uint8 if obs["dtype"] == "uint8" else np.float32
        self.obs = view("obs", obs_dtype, [n] + obs["shape"])
        self.final = view("final", obs_dtype, [n] + obs["shape"])
        self.kind = act["kind"]
        if self.kind == "discrete":
            self.act = view("act", np.int64, [rows])
        elif self.kind == "multi-discrete":
            # tandem's indices count from 0; the space's own values from its start.
            self.act = view("act", np.int64, [rows, len(act["nvec"])])
            self.start = np.asarray(act["start"], dtype=np.int64)
        elif self.kind == "multi-binary":
            self.act = view("act", np.int64, [rows, act["n"]])
        else:
            self.act = view("act", np.float32, [rows] + act["shape"])
            self.act_dtype = np.dtype(act["dtype"])
        self.rew = view("rew", np.float64, per)
        # Each step's values of the info keys (NaN: missing), read by tandem at episode ends.
        self.np, self.info_keys = np, info_keys
        self.info = view("info", np.float64, [n, len(info_keys)]) if info_keys else None
        self.term = view("term", np.uint8, per)
        self.trunc = view("trunc", np.uint8, per)
        self.stepped = view("stepped", np.uint8, [n])
        self.ready = view("ready", np.uint8, [n])
        self.seeded = view("seeded", np.uint8, [n])
        self.seed = view("seed", np.uint64, [n])
        self.turn = view("turn", np.uint64, [n]) if "turn" in off else None
        self.left = view("left", np.uint8, per) if "left" in off else None

    def put(self, rows, i, obs, info):
        rows[i] = obs if self.encode is None else self.encode(obs, info)

    def put_agents(self, i, env):
        """Which of game i's agents have left it, and whose turn it is."""
        if isinstance(env, Parallel):
            self.left[i] = env.left
        if isinstance(env, Turns):
            self.turn[i] = env.turn

    def put_info(self, i, info):
        for k, key in enumerate(self.info_keys):
            self.info[i, k] = info_value(self.np, info, key)

    def action(self, i):
        if self.agents is not None:
            return [self.one_action(i * self.agents + j) for j in range(self.agents)]
        return self.one_action(i)

    def one_action(self, i):
        # Copies: an environment may keep the action it was given.
        if self.kind == "discrete":
            return int(self.act[i])
        if self.kind == "multi-discrete":
            return self.act[i] + self.start
        if self.kind == "multi-binary":
            return self.act[i].astype("int8")
        return self.act[i].astype(self.act_dtype, copy=True)


def ended(env, terminated, truncated, np):
    """Whether the step ended the episode: a game's when every agent has left or is done."""
    if isinstance(env, Parallel):
        return env.over
    return np.all(np.logical_or(terminated, truncated))


def step(batch, envs, base, lo, hi):
    for i in range(lo, hi):
        env = envs[i - base]
        try:
            obs, reward, terminated, truncated, info = env.step(batch.action(i))
            # Before a reset replaces it: an episode's end is what the keys are logged at.
            batch.put_info(i, info)
            if ended(env, terminated, truncated, batch.np):
                batch.put(batch.final, i, obs, info)
                obs, info = env.reset()
                batch.ready[i] = 1
                batch.seeded[i] = 0
            elif isinstance(env, Parallel) and env.last is not None:
                # Agents left: their last observations, which tandem reads from this row.
                batch.put(batch.final, i, env.last, info)
            batch.put(batch.obs, i, obs, info)
            batch.put_agents(i, env)
        except BadInfo as e:
            error("info", env=i, message=str(e))
            return
        except (BadAgents, IllegalMove) as e:
            error("agents", env=i, message=str(e))
            return
        except BadObservation as e:
            error("observation", env=i, message=str(e))
            return
        except Exception:
            error("step", env=i, traceback=traceback.format_exc())
            return
        batch.rew[i] = reward
        batch.term[i] = batch.np.asarray(terminated, dtype=bool)
        batch.trunc[i] = batch.np.asarray(truncated, dtype=bool)
        batch.stepped[i] = 1
    reply(b"k\n")


def reset(batch, envs, base, words):
    for k in range(0, len(words), 2):
        i = int(words[k])
        seed = None if words[k + 1] == "-" else int(words[k + 1])
        env = envs[i - base]
        try:
            obs, info = env.reset(seed=seed)
            if seed is not None and isinstance(env, Parallel):
                env.seed_actions(seed)
            elif seed is not None:
                env.action_space.seed(seed)
            batch.put(batch.obs, i, obs, info)
            batch.put_agents(i, env)
        except BadAgents as e:
            error("agents", env=i, message=str(e))
            return
        except BadObservation as e:
            error("observation", env=i, message=str(e))
            return
        except Exception:
            error("reset", env=i, traceback=traceback.format_exc())
            return
        batch.ready[i] = 1
        batch.seeded[i] = seed is not None
        batch.seed[i] = 0 if seed is None else seed
    reply(b"k\n")


def uses_mujoco(env):
    return type(env.unwrapped).__module__.startswith("gymnasium.envs.mujoco") or hasattr(
        env.unwrapped, "mujoco_renderer"
    )


def render(np, envs, base, i):
    """Draws environment I; rendering only reads the simulation, so the episode goes on
    unchanged."""
    env = envs[i - base]
    try:
        frame = env.render()
    except Exception as e:
        message = f"render() raised {type(e).__name__}: {e}"
        if uses_mujoco(env):
            message += f" (MUJOCO_GL={os.environ.get('MUJOCO_GL', '')!r}). {GL_HELP}"
        error("render", env=i, message=f"{message}\n{traceback.format_exc()}")
        return
    if frame is None:
        error("render", env=i, message='render() returned None (the environment does not draw itself with render_mode="rgb_array")')
        return
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3 or 0 in frame.shape:
        error(
            "render",
            env=i,
            message=f"render() returned an array of shape {frame.shape} and dtype {frame.dtype}; tandem takes uint8 height x width x 3 RGB frames",
        )
        return
    height, width = frame.shape[:2]
    payload = np.ascontiguousarray(frame).tobytes().hex()
    reply({"frame": {"height": int(height), "width": int(width), "hex": payload}})


def main():
    stdin = sys.stdin.buffer
    config = json.loads(stdin.readline())
    started = start(config)
    if started is None:
        return
    np, envs, hello_obs, hello_act, encode = started
    line = stdin.readline()
    if not line:
        return
    try:
        batch = Batch(np, json.loads(line), hello_obs, hello_act, encode, config["info_keys"])
    except Exception:
        error("map", traceback=traceback.format_exc())
        return
    reply(b"k\n")
    base = config["lo"]
    while True:
        line = stdin.readline()
        if not line:
            break
        words = line.decode().split()
        if words[0] == "s":
            step(batch, envs, base, int(words[1]), int(words[2]))
        elif words[0] == "r":
            reset(batch, envs, base, words[1:])
        elif words[0] == "f" and config["render"]:
            render(np, envs, base, int(words[1]))
        else:
            error("protocol", message=f"unknown request {line!r}")
    for env in envs:
        env.close()


main()
