//! Tests of the strict-priority port, with a small event-driven driver of the kind the
//! simulator runs: one scheduler, a wake-up per port kept at the earliest timeout, and a bound
//! on the number of events that catches a driver/port pair that would spin.

use super::*;
use crate::link::Link;
use crate::Endpoint;
use pisadb_core::Scheduler;
use proptest::prelude::*;

/// A frame a test pushes: when it reaches the port, its class and its size.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// When the driver pushes it.
    at_ns: Nanos,
    /// Its class.
    class: u8,
    /// Its payload size.
    payload_bytes: usize,
}

/// What the driver observed.
#[derive(Debug, Default)]
struct Run {
    /// Frames collected from the port, in collection order; items are frame indices.
    arrivals: Vec<Arrival<usize>>,
    /// Indices of the frames the port refused.
    dropped: Vec<usize>,
    /// The most buffer the port reported after any push.
    occupancy_bytes_max: u64,
}

/// Events of the test driver.
#[derive(Debug)]
enum Event {
    /// Frame `i` reaches the port.
    Push(usize),
    /// The port's timeout.
    Wake,
}

/// Runs `frames` through `port` the way the simulator would. With `pop_before_push`, the driver
/// also collects from the port before every push, which must change nothing (decisions do not
/// depend on when the port is asked).
fn drive(port: &mut PriorityPort<usize>, frames: &[Frame], pop_before_push: bool) -> Run {
    let mut scheduler = Scheduler::new();
    for (index, frame) in frames.iter().enumerate() {
        scheduler.push(frame.at_ns, Event::Push(index));
    }
    // At most one push and, per push, a handful of wake-ups (one productive, one made stale by
    // a later push, one that found its frame overtaken): anything beyond is a spinning driver.
    let events_max = 6 * frames.len() + 2;
    let mut events = 0;
    let mut armed_ns: Option<Nanos> = None;
    let mut run = Run::default();
    while let Some((now, event)) = scheduler.pop() {
        events += 1;
        assert!(events <= events_max, "more than {events_max} events for {} frames: the driver spins", frames.len());
        match event {
            Event::Push(index) => {
                if pop_before_push {
                    while let Some(arrival) = port.pop_arrival(now) {
                        run.arrivals.push(arrival);
                    }
                }
                let frame = frames[index];
                if let Err(dropped) = port.push(now, frame.class, frame.payload_bytes, index) {
                    run.dropped.push(dropped.item);
                }
                run.occupancy_bytes_max = run.occupancy_bytes_max.max(port.occupancy_bytes());
            }
            Event::Wake => {
                if armed_ns != Some(now) {
                    continue; // superseded by an earlier wake-up
                }
                armed_ns = None;
                while let Some(arrival) = port.pop_arrival(now) {
                    run.arrivals.push(arrival);
                }
            }
        }
        if let Some(timeout_ns) = port.poll_timeout() {
            let wake_ns = timeout_ns.max(now);
            match armed_ns {
                Some(armed) if armed <= wake_ns => {}
                _ => {
                    armed_ns = Some(wake_ns);
                    scheduler.push(wake_ns, Event::Wake);
                }
            }
        }
    }
    run
}

/// A 10 GbE port with `classes` classes and `buffer_bytes` of buffer.
fn port<T>(classes: u8, buffer_bytes: u64) -> PriorityPort<T> {
    PriorityPort::new(LinkParams::ten_gbe(), classes, buffer_bytes).unwrap()
}

/// Frame indices in the order they arrived.
fn order(run: &Run) -> Vec<usize> {
    run.arrivals.iter().map(|arrival| arrival.item).collect()
}

#[test]
fn a_high_class_frame_overtakes_a_waiting_low_one_but_never_preempts_the_wire() {
    let frames = [
        Frame { at_ns: 0, class: 0, payload_bytes: 1434 }, // on the wire 0..1200
        Frame { at_ns: 10, class: 0, payload_bytes: 1434 }, // waits
        Frame { at_ns: 20, class: 1, payload_bytes: 1434 }, // more urgent, pushed while the wire is busy
    ];
    let mut port = port(2, 1 << 20);
    let run = drive(&mut port, &frames, false);
    assert_eq!(order(&run), vec![0, 2, 1], "the high frame overtakes the waiting low one");
    let arrivals: Vec<Nanos> = run.arrivals.iter().map(|a| a.arrival_at_ns).collect();
    assert_eq!(arrivals, vec![1215, 2415, 3615], "the first frame is not preempted: it still leaves at 1200");
    assert_eq!(port.counters()[1].sent_frames, 1);
    assert_eq!(port.counters()[0].sent_frames, 2);
    assert!(port.is_empty());
}

#[test]
fn a_frame_pushed_as_the_wire_frees_competes_whatever_the_call_order() {
    for collect_first in [false, true] {
        let mut port = port(2, 1 << 20);
        port.push(0, 0, 1434, 0).unwrap();
        port.push(10, 0, 1434, 1).unwrap();
        assert_eq!(port.poll_timeout(), Some(1200));
        if collect_first {
            assert_eq!(port.pop_arrival(1200).map(|a| a.item), Some(0));
        }
        port.push(1200, 1, 1434, 2).unwrap();
        let mut order = Vec::new();
        // Each timeout hands over one frame here; more wake-ups than frames would be a spin.
        for _ in 0..3 {
            let Some(timeout_ns) = port.poll_timeout() else { break };
            while let Some(arrival) = port.pop_arrival(timeout_ns) {
                order.push(arrival.item);
            }
        }
        assert!(port.is_empty(), "three wake-ups deliver three frames");
        assert!(order.ends_with(&[2, 1]), "collect_first = {collect_first}: {order:?}");
    }
}

#[test]
fn tail_drop_returns_the_item_and_counts_it() {
    // Room for two 1480-byte frames and a minimum one, not three big ones.
    let mut port = port(2, 3_100);
    port.push(0, 0, 1434, 'a').unwrap();
    port.push(0, 1, 1434, 'b').unwrap();
    let dropped = port.push(0, 1, 1434, 'c').unwrap_err();
    assert_eq!(dropped, Dropped { class: 1, payload_bytes: 1434, occupancy_bytes: 2_960, item: 'c' });
    assert_eq!(port.counters()[1].dropped_frames, 1);
    assert_eq!(port.counters()[1].dropped_bytes, 1_480);
    assert_eq!(port.counters()[1].enqueued_frames, 1);
    assert_eq!(port.counters()[0].dropped_frames, 0);
    // A small frame still fits in what is left: tail drop is per frame, not a lockout.
    port.push(0, 0, 0, 'd').unwrap();
    assert_eq!(port.occupancy_bytes(), 3_024);
    assert_eq!(port.peak_occupancy_bytes(), 3_024);
}

#[test]
fn the_frame_on_the_wire_holds_buffer_until_its_last_bit_leaves() {
    let mut port = port(1, 1_480);
    port.push(0, 0, 1434, 0).unwrap();
    port.push(1, 0, 0, 1).unwrap_err();
    assert_eq!(port.occupancy_bytes(), 1_480, "serializing until 1200 ns, so still buffered");
    port.push(1199, 0, 0, 2).unwrap_err();
    port.push(1200, 0, 1434, 3).unwrap();
    assert_eq!(port.occupancy_bytes(), 1_480, "the first frame left at 1200 ns and freed its bytes");
    assert_eq!(port.pop_arrival(1200).map(|a| (a.item, a.arrival_at_ns)), Some((0, 1215)));
    assert_eq!(port.counters()[0].peak_occupancy_bytes, 1_480);
}

#[test]
fn timeouts_follow_the_frame_the_wire_would_choose() {
    let mut port = port(2, 1 << 20);
    assert_eq!(port.poll_timeout(), None, "an empty port never wakes");
    port.push(100, 0, 1434, 0).unwrap();
    assert_eq!(port.poll_timeout(), Some(1300), "an idle wire takes the frame at once");
    assert_eq!(port.pop_arrival(1299), None);
    assert_eq!(port.poll_timeout(), Some(1300), "an early pop changes nothing");
    port.push(1299, 0, 1434, 1).unwrap();
    port.push(1299, 1, 0, 2).unwrap();
    assert_eq!(port.pop_arrival(1300).map(|a| a.item), Some(0));
    assert_eq!(port.pop_arrival(1300), None);
    assert_eq!(port.poll_timeout(), Some(1368), "the urgent minimum frame goes next: 68 ns");
}

#[test]
fn constructor_rejects_bad_settings() {
    let ten = LinkParams::ten_gbe();
    let out_of_range = |field| move |error| matches!(error, NetError::OutOfRange { field: f, .. } if f == field);
    assert!(PriorityPort::<()>::new(ten.clone(), 0, 10_000).is_err_and(out_of_range("classes")));
    assert!(PriorityPort::<()>::new(ten.clone(), 9, 10_000).is_err_and(out_of_range("classes")));
    assert!(PriorityPort::<()>::new(ten.clone(), 8, 63).is_err_and(out_of_range("buffer_bytes")));
    assert!(PriorityPort::<()>::new(ten.clone(), 8, 64).is_ok());
    let broken = LinkParams { gbps: 0.0, ..ten };
    assert!(matches!(PriorityPort::<()>::new(broken, 1, 64), Err(NetError::BadLineRate { .. })));
}

#[test]
#[should_panic(expected = "class 2 on a port with 2 classes")]
fn a_class_beyond_the_port_is_a_driver_bug() {
    let _ = port(2, 10_000).push(0, 2, 0, 0);
}

#[test]
#[should_panic(expected = "time went back")]
fn time_going_back_is_a_driver_bug() {
    let mut port = port(1, 10_000);
    port.push(10, 0, 0, 0).unwrap();
    let _ = port.push(9, 0, 0, 1);
}

#[test]
fn discipline_config_reads_as_it_is_written() {
    let strict = PortDiscipline::StrictPriority { classes: 4, buffer_bytes: 65_536 };
    let json = serde_json::to_string(&strict).unwrap();
    assert_eq!(json, r#"{"StrictPriority":{"classes":4,"buffer_bytes":65536}}"#);
    assert_eq!(serde_json::from_str::<PortDiscipline>(&json).unwrap(), strict);
    assert_eq!(serde_json::from_str::<PortDiscipline>(r#""Fifo""#).unwrap(), PortDiscipline::default());
}

/// Frames with non-decreasing push times, up to `classes` classes.
fn frames(classes: u8, len: usize) -> impl Strategy<Value = Vec<Frame>> {
    prop::collection::vec((0..1_500u64, 0..classes, 0..1_500usize), 0..len).prop_map(|draws| {
        let mut at_ns = 0;
        draws
            .into_iter()
            .map(|(gap_ns, class, payload_bytes)| {
                at_ns += gap_ns;
                Frame { at_ns, class, payload_bytes }
            })
            .collect()
    })
}

/// A port configuration and frames for it.
fn scenario() -> impl Strategy<Value = (u8, u64, Vec<Frame>)> {
    (1..=MAX_CLASSES, 64..12_000u64).prop_flat_map(|(classes, buffer_bytes)| {
        frames(classes, 60).prop_map(move |frames| (classes, buffer_bytes, frames))
    })
}

/// When each collected frame started on the wire.
fn starts(arrivals: &[Arrival<usize>], params: &LinkParams) -> Vec<Nanos> {
    arrivals
        .iter()
        .map(|a| a.arrival_at_ns - params.propagation_ns - params.serialization_ns(a.payload_bytes))
        .collect()
}

proptest! {
    #[test]
    fn every_frame_drops_or_arrives_exactly_once_in_time_order_within_the_buffer(
        (classes, buffer_bytes, frames) in scenario()
    ) {
        let mut port = port(classes, buffer_bytes);
        let run = drive(&mut port, &frames, false);
        let mut seen: Vec<usize> = order(&run).into_iter().chain(run.dropped.iter().copied()).collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..frames.len()).collect::<Vec<_>>());
        prop_assert!(run.arrivals.windows(2).all(|w| w[0].arrival_at_ns <= w[1].arrival_at_ns));
        prop_assert!(run.occupancy_bytes_max <= buffer_bytes);
        prop_assert!(port.peak_occupancy_bytes() <= buffer_bytes);
        prop_assert!(port.is_empty());
        prop_assert_eq!(port.occupancy_bytes(), 0);
        let total = |count: fn(&ClassCounters) -> u64| port.counters().iter().map(count).sum::<u64>();
        prop_assert_eq!(total(|c| c.sent_frames), run.arrivals.len() as u64);
        prop_assert_eq!(total(|c| c.enqueued_frames), run.arrivals.len() as u64);
        prop_assert_eq!(total(|c| c.dropped_frames), run.dropped.len() as u64);
    }

    #[test]
    fn the_wire_serves_the_most_urgent_ready_frame_without_preemption_or_idling(
        (classes, buffer_bytes, frames) in scenario()
    ) {
        let mut port = port(classes, buffer_bytes);
        let run = drive(&mut port, &frames, false);
        let params = LinkParams::ten_gbe();
        let starts = starts(&run.arrivals, &params);
        for (position, arrival) in run.arrivals.iter().enumerate() {
            let frame = frames[arrival.item];
            prop_assert!(starts[position] >= frame.at_ns, "a frame starts before it arrives");
            if position > 0 {
                let finish_before = run.arrivals[position - 1].arrival_at_ns - params.propagation_ns;
                prop_assert!(starts[position] >= finish_before, "preempted the frame on the wire");
            }
            // Nothing more urgent, and nothing earlier of its own class, was waiting when it started.
            for (later_position, later) in run.arrivals.iter().enumerate().skip(position + 1) {
                let other = frames[later.item];
                let waiting = other.at_ns <= starts[position];
                prop_assert!(!(waiting && other.class > frame.class), "{later_position} should have gone first");
                prop_assert!(!(other.class == frame.class && later.item < arrival.item), "FIFO within a class broken");
            }
        }
        let first_ready_ns = run.arrivals.iter().map(|a| frames[a.item].at_ns).min();
        prop_assert_eq!(starts.first().copied(), first_ready_ns, "the first accepted frame waits for nothing");
        // Work conservation: whenever the wire goes idle and restarts, no accepted frame was
        // waiting through the idle stretch.
        for position in 1..run.arrivals.len() {
            let idle_from = run.arrivals[position - 1].arrival_at_ns - params.propagation_ns;
            let idle_until = starts[position];
            for (other_position, other) in run.arrivals.iter().enumerate() {
                let waited_through = frames[other.item].at_ns < idle_until && starts[other_position] >= idle_until;
                prop_assert!(!(idle_until > idle_from && waited_through), "the wire idled while a frame waited");
            }
        }
    }

    #[test]
    fn when_the_port_is_asked_changes_nothing((classes, buffer_bytes, frames) in scenario()) {
        let lazy = drive(&mut port(classes, buffer_bytes), &frames, false);
        let eager = drive(&mut port(classes, buffer_bytes), &frames, true);
        prop_assert_eq!(lazy.arrivals, eager.arrivals);
        prop_assert_eq!(lazy.dropped, eager.dropped);
    }

    #[test]
    fn with_one_class_the_port_is_the_fifo_arithmetic(frames in frames(1, 80)) {
        let params = LinkParams::ten_gbe();
        let mut link = Link::new(Endpoint::Host(0), Endpoint::Switch(0), params.clone());
        let expected: Vec<(usize, Nanos)> =
            frames.iter().enumerate().map(|(index, f)| (index, link.carry(f.at_ns, f.payload_bytes))).collect();
        let mut port = PriorityPort::new(params, 1, u64::MAX).unwrap();
        let run = drive(&mut port, &frames, false);
        let got: Vec<(usize, Nanos)> = run.arrivals.iter().map(|a| (a.item, a.arrival_at_ns)).collect();
        prop_assert_eq!(got, expected);
    }
}
