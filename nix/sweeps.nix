# The sweeps the flake declares: one app each (`nix run .#cartpole-seeds`), and every variant is
# validated by `nix flake check` (checks.validate-sweeps). docs/nix.md walks through this file.
{ lib }:
let
  # cartpole.kdl written in Nix (same includes, same settings), cut to 50k steps so that a
  # sweep of it takes a minute or two on a laptop.
  cartpole-short = {
    name = "cartpole-short";
    include = [
      ../experiments/include/ppo-cartpole.kdl
      ../experiments/include/cpu-logging.kdl
    ];
    seed = 1;
    devices = [ "cpu" ];
    train.total-steps = 50000;
  };
in
{
  cartpole-seeds = lib.sweep {
    base = cartpole-short;
    grid.seed = [
      1
      2
      3
    ];
  };
}
