//! Scripted tests of the 2PC machines, goldenscript style: each file under `scripts/` is a
//! scenario of commands, and the lines starting with `> ` under a command are what the
//! machines must say to it. The runner replays the commands and compares; on a mismatch it
//! prints the whole transcript as it should read, ready to compare with the file.
//!
//! The world is one coordinator (a [`Round`] at a time and its [`Decisions`]) and
//! participants on nodes `1..`, each a [`Participant`] whose progress is whether the
//! transaction's reads are done. Transactions are named by small numbers.
//!
//! | command | what it does |
//! |---|---|
//! | `round N` | a new round expecting N answers |
//! | `answer NODE yes\|no` | an answer from NODE |
//! | `commit TXN` | the coordinator records TXN committed |
//! | `inquire TXN [deciding]` | a participant asks about TXN (the coordinator may still be deciding it) |
//! | `admit P TXN local\|remote C` | participant P starts serving TXN (reads not done) |
//! | `crash P` | participant P loses everything it served |
//! | `recover P TXN C` | participant P serves TXN, prepared for coordinator C before a crash |
//! | `reads-done P TXN` | TXN's reads on P are done |
//! | `vote P TXN` | P is asked to prepare TXN |
//! | `lease P TXN` | TXN's lease on P runs out |
//! | `end P TXN` | P stops serving TXN (committed or aborted) |
//! | `in-doubt P` | the transactions P prepared and waits on |

use super::*;
use crate::id::TxnId;
use std::collections::BTreeMap;

struct World {
    round: Round,
    decisions: Decisions,
    participants: BTreeMap<u16, Participant<bool>>,
}

fn txn(word: &str) -> TxnId {
    TxnId::from_bits(word.parse().expect("a transaction number"))
}

fn num(word: &str) -> u16 {
    word.parse().expect("a node number")
}

impl World {
    fn run(&mut self, line: &str) -> Vec<String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let p = |i: usize| num(words[i]);
        match words[..] {
            ["round", n] => {
                self.round = Round::new(n.parse().unwrap());
                vec![]
            }
            ["answer", from, yes] => match self.round.answer(num(from), yes == "yes") {
                Ok(tally) => vec![format!("{tally:?}")],
                Err(e) => vec![format!("refused: {e}")],
            },
            ["commit", t] => {
                self.decisions.commit(txn(t));
                vec![]
            }
            ["inquire", t, ref rest @ ..] => {
                vec![format!("{:?}", self.decisions.outcome(txn(t), rest == ["deciding"]))]
            }
            ["admit", _, t, origin, ref rest @ ..] => {
                let origin = match (origin, rest) {
                    ("local", []) => Origin::Local,
                    ("remote", [c]) => Origin::Remote(num(c)),
                    _ => panic!("admit P TXN local|remote C"),
                };
                let admitted = self.participants.entry(p(1)).or_default().admit(txn(t), origin, false);
                vec![if admitted { "admitted".into() } else { "duplicate: served already".into() }]
            }
            ["crash", _] => {
                self.participants.remove(&p(1));
                vec![]
            }
            ["recover", _, t, c] => {
                self.participants.entry(p(1)).or_default().admit_prepared(txn(t), num(c), true);
                vec![]
            }
            ["reads-done", _, t] => {
                let served = self.participants.entry(p(1)).or_default().get_mut(txn(t));
                served.map(|s| s.progress = true).map_or(vec!["not served".into()], |()| vec![])
            }
            ["vote", _, t] => {
                let yes = self.participants.entry(p(1)).or_default().vote(txn(t), |&done| done);
                vec![if yes { "yes".into() } else { "no".into() }]
            }
            ["lease", _, t] => vec![format!("{:?}", self.participants.entry(p(1)).or_default().lease_expired(txn(t)))],
            ["end", _, t] => match self.participants.entry(p(1)).or_default().end(txn(t)) {
                Some(s) => vec![format!("ended, voted: {}", s.voted)],
                None => vec!["not served".into()],
            },
            ["in-doubt", _] => {
                let txns: Vec<u64> = self.participants.entry(p(1)).or_default().in_doubt().map(|t| t.bits()).collect();
                vec![format!("{txns:?}")]
            }
            _ => panic!("unknown command: {line}"),
        }
    }
}

fn replay(name: &str, script: &str) {
    let mut world = World { round: Round::new(0), decisions: Decisions::new(), participants: BTreeMap::new() };
    let (mut want, mut got) = (String::new(), String::new());
    for line in script.lines() {
        if line.starts_with("> ") {
            want.push_str(line);
            want.push('\n');
            continue;
        }
        want.push_str(line);
        want.push('\n');
        got.push_str(line);
        got.push('\n');
        let command = line.trim();
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        for said in world.run(command) {
            got.push_str(&format!("> {said}\n"));
        }
    }
    assert!(want == got, "{name}: the machines said otherwise; the script should read:\n{got}");
}

#[test]
fn rounds() {
    replay("rounds", include_str!("scripts/rounds.txt"));
}

#[test]
fn votes_and_leases() {
    replay("votes_and_leases", include_str!("scripts/votes_and_leases.txt"));
}

#[test]
fn inquiries_after_a_timeout_and_a_crash() {
    replay("inquiries", include_str!("scripts/inquiries.txt"));
}
