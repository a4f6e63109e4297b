# tandem's Nix library (the flake's `lib` output): experiments written as Nix attribute sets,
# turned into experiment files through JSON, and variants of an experiment derived from a grid
# of overrides, for sweeps. Pure Nix, no nixpkgs: `builtins.toFile` writes the files, so they
# exist as soon as the flake is evaluated. docs/nix.md has a worked example.
#
# An experiment attribute set is the JSON form of an experiment (what `tandem resolve --format
# json` prints), or any part of it: `name`, top-level settings, one attribute set per section
# with its kind under `kind` (`game` for `env`, `policy` for `sync`), and `include`, a path or a
# list of paths, applied before the set's own settings.
rec {
  # The store path of an experiment file holding `experiment` as JSON (its name: `NAME.json`).
  experimentFile = experiment: builtins.toFile "${experiment.name}.json" (builtins.toJSON experiment);

  # `base` with `changes` applied: attribute sets (sections, keyword arguments) merge key by
  # key, anything else (a number, a list such as `devices`) is replaced.
  override =
    base: changes:
    base
    // builtins.mapAttrs (
      key: value:
      if builtins.isAttrs value && builtins.isAttrs (base.${key} or null) then
        override base.${key} value
      else
        value
    ) changes;

  # `{ "algorithm.lr" = 0.001; }` -> `{ algorithm = { lr = 0.001; }; }`.
  fromPath =
    path: value:
    builtins.foldl' (inner: key: { ${key} = inner; }) value (
      builtins.foldl' (reversed: key: [ key ] ++ reversed) [ ] (
        builtins.filter builtins.isString (builtins.split "\\." path)
      )
    );

  # Every combination of a grid's values, as override sets: `{ seed = [ 1 2 ]; "algorithm.lr" =
  # [ 0.001 0.0003 ]; }` gives four. Keys in sorted order, the last one varying fastest.
  combinations =
    grid:
    builtins.foldl' (
      partial: key:
      builtins.concatMap (done: map (value: done // { ${key} = value; }) grid.${key}) partial
    ) [ { } ] (builtins.attrNames grid);

  # A name fragment for one grid value: `seed-1`, `lr-0.001`, `devices-cpu_cpu`.
  fragment =
    path: value:
    let
      last = builtins.elemAt (builtins.filter builtins.isString (builtins.split "\\." path)) (
        builtins.length (builtins.filter builtins.isString (builtins.split "\\." path)) - 1
      );
      text =
        if builtins.isString value then
          value
        else
          builtins.replaceStrings [ "\"" "[" "]" "," " " ] [ "" "" "" "_" "_" ] (builtins.toJSON value);
    in
    "${last}-${text}";

  # The variants of `base` over `grid`, each an experiment attribute set named after its grid
  # values (`cartpole-seed-1`), so every variant gets a run directory of its own.
  variants =
    { base, grid }:
    map (
      combination:
      let
        changes = builtins.foldl' (acc: path: override acc (fromPath path combination.${path})) { } (
          builtins.attrNames combination
        );
        suffix = builtins.concatStringsSep "-" (
          map (path: fragment path combination.${path}) (builtins.attrNames combination)
        );
      in
      override base changes // { name = "${base.name}-${suffix}"; }
    ) (combinations grid);

  # A sweep: its variants and their experiment files, in the order `tandem sweep` runs them.
  sweep =
    { base, grid }:
    rec {
      experiments = variants { inherit base grid; };
      files = map experimentFile experiments;
    };
}
