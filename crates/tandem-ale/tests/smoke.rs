use tandem_ale::{Ale, AleSettings};
#[test]
fn smoke() {
    let mut ale = Ale::new("breakout", &AleSettings::new(7, 0.25)).unwrap();
    ale.reset().unwrap();
    println!("{:?} lives {} dims {:?}", ale.action_set(), ale.lives(), ale.screen_dims());
    let mut total = 0;
    let mut steps = 0;
    while !ale.game_over() { total += ale.act(steps % 4).unwrap(); steps += 1; }
    println!("steps {steps} total {total} frame {}", ale.frame_number());
}
