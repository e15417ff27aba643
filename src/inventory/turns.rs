//! Whose node listing starts next when a slot frees: turns by owner, in rotation, so that one
//! owner's slow control nodes hold at most their share of `check.concurrency` while other
//! owners' clusters wait. Pure bookkeeping: the listings themselves run in `inventory`.

use std::collections::{BTreeSet, HashMap, VecDeque};

/// The listings waiting for a slot, by owner. The owner with the fewest listings in flight
/// goes next, and among those the one whose last turn is the oldest (an owner not served yet
/// before one that was, in the order their first clusters were given); each owner's own
/// clusters keep the order they were given in. No slot stays idle while a listing waits:
/// an owner takes more than its share only when no other has anything waiting.
#[derive(Debug)]
pub struct Turns<T> {
    /// Per owner (by slot), its listings not started, in their order.
    waiting: Vec<VecDeque<T>>,
    /// Per owner, its listings started and not yet finished.
    in_flight: Vec<usize>,
    /// Per owner, when its last turn came (a count of turns; never served: its rank).
    last_turn: Vec<u64>,
    /// The owners with listings waiting, as (in flight, last turn, owner): the first is next.
    ready: BTreeSet<(usize, u64, usize)>,
    turns: u64,
}

/// One owner of the listings, as [`Turns`] numbers them.
pub type OwnerSlot = usize;

impl<T> Turns<T> {
    /// `items` in the order they should go within each owner, with their owner's key. An
    /// item with no owner is an owner of its own: it waits for no other, and none for it.
    pub fn new(items: impl IntoIterator<Item = (Option<String>, T)>) -> Turns<T> {
        let mut slots: HashMap<String, OwnerSlot> = HashMap::new();
        let mut waiting: Vec<VecDeque<T>> = Vec::new();
        for (owner, item) in items {
            let fresh = waiting.len();
            let slot = match owner {
                Some(key) => *slots.entry(key).or_insert(fresh),
                None => fresh,
            };
            if slot == fresh {
                waiting.push(VecDeque::new());
            }
            waiting[slot].push_back(item);
        }
        let owners = waiting.len();
        let last_turn: Vec<u64> = (0..owners as u64).collect();
        Turns {
            ready: (0..owners).map(|o| (0, last_turn[o], o)).collect(),
            in_flight: vec![0; owners],
            last_turn,
            waiting,
            turns: owners as u64,
        }
    }

    /// The next listing to start, with its owner (to pass to [`Turns::finished`]); `None`
    /// when none waits.
    pub fn next(&mut self) -> Option<(OwnerSlot, T)> {
        let (_, _, owner) = self.ready.pop_first()?;
        let item = self.waiting[owner].pop_front()?;
        self.in_flight[owner] += 1;
        self.last_turn[owner] = self.turns;
        self.turns += 1;
        self.enqueue(owner);
        Some((owner, item))
    }

    /// A listing of `owner` ended: its slot goes to whoever is next.
    pub fn finished(&mut self, owner: OwnerSlot) {
        let Some(flying) = self.in_flight.get(owner).copied().filter(|&n| n > 0) else {
            return;
        };
        self.ready.remove(&(flying, self.last_turn[owner], owner));
        self.in_flight[owner] = flying - 1;
        self.enqueue(owner);
    }

    /// The listings whose turn never came, owner by owner.
    pub fn into_waiting(self) -> impl Iterator<Item = T> {
        self.waiting.into_iter().flatten()
    }

    fn enqueue(&mut self, owner: OwnerSlot) {
        if !self.waiting[owner].is_empty() {
            self.ready
                .insert((self.in_flight[owner], self.last_turn[owner], owner));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(items: &[(&str, &'static str)]) -> Turns<&'static str> {
        Turns::new(
            items
                .iter()
                .map(|&(owner, item)| ((!owner.is_empty()).then(|| owner.to_string()), item)),
        )
    }

    /// Starts listings while fewer than `slots` are in flight.
    fn fill(
        turns: &mut Turns<&'static str>,
        flying: &mut Vec<(OwnerSlot, &'static str)>,
        slots: usize,
    ) {
        while flying.len() < slots {
            let Some(next) = turns.next() else { break };
            flying.push(next);
        }
    }

    #[test]
    fn owners_take_turns_and_keep_their_own_order() {
        let mut turns = owned(&[
            ("a", "a1"),
            ("a", "a2"),
            ("a", "a3"),
            ("b", "b1"),
            ("a", "a4"),
            ("c", "c1"),
            ("b", "b2"),
        ]);
        let order: Vec<&str> = std::iter::from_fn(|| turns.next().map(|(_, i)| i)).collect();
        // Nothing finishes: each turn goes to an owner with the fewest in flight, in
        // rotation, until only a's are left.
        assert_eq!(order, ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]);
    }

    #[test]
    fn a_slow_owner_holds_its_share_while_others_wait_and_every_slot_when_none_does() {
        // 4 slots; a's listings never end, b's and c's end as soon as they start.
        let mut turns = owned(&[
            ("a", "a1"),
            ("a", "a2"),
            ("a", "a3"),
            ("a", "a4"),
            ("a", "a5"),
            ("b", "b1"),
            ("b", "b2"),
            ("b", "b3"),
            ("c", "c1"),
        ]);
        let mut flying = Vec::new();
        let mut started = Vec::new();
        fill(&mut turns, &mut flying, 4);
        started.extend(flying.iter().map(|&(_, i)| i));
        assert_eq!(started, ["a1", "b1", "c1", "a2"]);
        // b's and c's end one after another; a never holds more than 2 of the 4 slots
        // while b or c has one waiting.
        while let Some(at) = flying.iter().position(|(_, i)| !i.starts_with('a')) {
            let (owner, _) = flying.remove(at);
            turns.finished(owner);
            let before = flying.len();
            fill(&mut turns, &mut flying, 4);
            started.extend(flying[before..].iter().map(|&(_, i)| i));
        }
        assert_eq!(
            started,
            ["a1", "b1", "c1", "a2", "b2", "b3", "a3", "a4"],
            "a takes the slots b and c no longer need"
        );
        assert_eq!(flying.len(), 4);
        assert_eq!(turns.into_waiting().collect::<Vec<_>>(), ["a5"]);
    }

    #[test]
    fn clusters_of_no_known_owner_are_each_an_owner_of_their_own() {
        let mut turns = owned(&[("a", "a1"), ("a", "a2"), ("", "x"), ("", "y")]);
        let first: Vec<&str> = (0..3)
            .filter_map(|_| turns.next().map(|(_, i)| i))
            .collect();
        assert_eq!(first, ["a1", "x", "y"]);
    }

    #[test]
    fn a_turn_that_ends_twice_or_never_started_changes_nothing() {
        let mut turns = owned(&[("a", "a1"), ("a", "a2"), ("b", "b1")]);
        let (a, _) = turns.next().unwrap();
        turns.finished(a);
        turns.finished(a);
        turns.finished(7);
        assert_eq!(turns.next().map(|(_, i)| i), Some("b1"));
        assert_eq!(turns.next().map(|(_, i)| i), Some("a2"));
        assert_eq!(turns.next(), None);
    }
}
