//! What the model-checked protocols of this folder share: a check that every reachable state
//! can still finish once the faults stop.
//!
//! stateright's `Property::eventually` is judged only on paths that end (it cannot tell a cycle
//! from a join, so a path that closes a cycle is a false negative), and these models are full
//! of cycles: a resend of a message already in flight, a query asked again. Liveness is
//! therefore checked here in its usual finite-state form, *from every reachable state some
//! path of fault-free steps reaches a finished state* (CTL's AG EF finished): the reachable
//! graph is enumerated with every action, the edges of fault actions (crashes, losses, lease
//! expiries a model names) are dropped, and "can finish" is propagated backwards from the
//! finished states. A reachable state that cannot finish is a wedge, and its shortest path
//! from the start is the counterexample. This does not prove that every fair run finishes (a
//! run may resend forever); it proves that nothing gets stuck where no sequence of deliveries,
//! resends and restarts could help, which is the bug a lost decision or a claim nobody
//! releases would be.
//!
//! States are kept in a `BTreeMap` (the workspace's rule: no hash maps), so a model's state
//! derives `Ord`.

use stateright::Model;
use std::collections::{BTreeMap, VecDeque};

/// Enumerates every state of `model` reachable from its initial states and checks that each can
/// reach a state where `finished` holds through actions for which `is_fault` is false.
///
/// Returns the number of reachable states, or the shortest action path to a state that cannot
/// finish.
pub(crate) fn every_state_can_finish<M>(
    model: &M,
    is_fault: impl Fn(&M::Action) -> bool,
    finished: impl Fn(&M::State) -> bool,
) -> Result<usize, Vec<M::Action>>
where
    M: Model,
    M::State: Ord + Clone,
    M::Action: Clone,
{
    let mut graph = Graph::<M>::default();
    for state in model.init_states() {
        graph.visit(state, None);
    }
    let mut actions = Vec::new();
    while let Some(id) = graph.queue.pop_front() {
        let state = graph.states[id].clone();
        model.actions(&state, &mut actions);
        for action in actions.drain(..) {
            let fault = is_fault(&action);
            let Some(next) = model.next_state(&state, action.clone()) else { continue };
            let to = graph.visit(next, Some((id, action)));
            if !fault {
                graph.predecessors[to].push(id);
            }
        }
    }
    let mut can_finish: Vec<bool> = graph.states.iter().map(&finished).collect();
    let mut work: Vec<usize> = (0..can_finish.len()).filter(|&i| can_finish[i]).collect();
    while let Some(to) = work.pop() {
        for &from in &graph.predecessors[to] {
            if !can_finish[from] {
                can_finish[from] = true;
                work.push(from);
            }
        }
    }
    // States are numbered in breadth-first order, so the first wedge has a shortest path.
    let Some(mut wedge) = can_finish.iter().position(|&ok| !ok) else { return Ok(graph.states.len()) };
    let mut path = Vec::new();
    while let Some((from, action)) = graph.parent[wedge].take() {
        path.push(action);
        wedge = from;
    }
    path.reverse();
    Err(path)
}

/// The reachable graph as it is enumerated, breadth first.
struct Graph<M: Model> {
    /// State → its number.
    index: BTreeMap<M::State, usize>,
    /// Number → state.
    states: Vec<M::State>,
    /// How each state was first reached (for the counterexample).
    parent: Vec<Option<(usize, M::Action)>>,
    /// Each state's predecessors through fault-free actions.
    predecessors: Vec<Vec<usize>>,
    /// States whose successors are still to be enumerated.
    queue: VecDeque<usize>,
}

impl<M: Model> Default for Graph<M> {
    fn default() -> Self {
        Graph {
            index: BTreeMap::new(),
            states: Vec::new(),
            parent: Vec::new(),
            predecessors: Vec::new(),
            queue: VecDeque::new(),
        }
    }
}

impl<M: Model> Graph<M>
where
    M::State: Ord + Clone,
    M::Action: Clone,
{
    /// The number of `state`, numbering (and queueing) it if it is new.
    fn visit(&mut self, state: M::State, from: Option<(usize, M::Action)>) -> usize {
        if let Some(&known) = self.index.get(&state) {
            return known;
        }
        let id = self.states.len();
        self.index.insert(state.clone(), id);
        self.states.push(state);
        self.parent.push(from);
        self.predecessors.push(Vec::new());
        self.queue.push_back(id);
        id
    }
}
