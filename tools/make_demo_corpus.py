#!/usr/bin/env python3
"""Write coniti/data/demo-notes.jsonl: the demo's corpus, an assistant's memory of several people.

Deterministic (fixed seed, no network): rerunning writes the same bytes. Each line is one note:
``{"id", "namespace": [..], "time": ISO-8601 UTC, "text", "metadata": {..}}``, in time order.
Story notes (the facts the demo asks about) have readable ids; routine notes are numbered per
namespace. Run: ``.venv/bin/python tools/make_demo_corpus.py [--check]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "coniti" / "data" / "demo-notes.jsonl"


def at(day: str, hour: int = 10, minute: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=UTC)


# -- story notes: (id, namespace, when, text, metadata) ----------------------------------------

STORY: list[tuple[str, str, datetime, str, dict[str, object]]] = [
    # team/atlas: the launch date moves, then the launch happens
    ("atlas-kickoff", "team/atlas", at("2025-01-08", 9, 30),
     "Atlas kickoff: migrate the shipment tracking pipeline from the nightly batch jobs to streaming "
     "on Kafka. Alice Moreau leads, Priya owns ingestion, Tom owns the dashboards.",
     {"source": "meeting", "tags": ["kickoff"]}),
    ("atlas-launch-plan", "team/atlas", at("2025-01-15", 14),
     "Atlas launch date set for April 1: cut over the EU region first, then US a week later.",
     {"source": "meeting", "tags": ["launch", "decision"]}),
    ("atlas-vendor-delay", "team/atlas", at("2025-03-12", 16, 10),
     "New Atlas launch date: May 15, moved from April 1 because the Kafka vendor delayed the managed "
     "cluster upgrade.",
     {"source": "email", "tags": ["launch", "risk"]}),
    ("atlas-launched", "team/atlas", at("2025-05-20", 18, 5),
     "Atlas launch date was May 20: the EU region is live on streaming after a five-day slip for the "
     "consumer lag fix; the US cut-over follows on May 27.",
     {"source": "chat", "tags": ["launch"]}),
    ("atlas-retro", "team/atlas", at("2025-05-28", 11),
     "Atlas retrospective is booked for June 3 in the Harbour room.",
     {"source": "calendar", "tags": ["retro"]}),
    ("atlas-oncall", "team/atlas", at("2025-02-03", 9),
     "Atlas on-call rotation: Priya first week of each month, Tom second, Alice third, Sam fourth.",
     {"source": "chat", "tags": ["oncall"]}),
    ("atlas-budget", "team/atlas", at("2025-01-20", 15),
     "Atlas cloud budget approved at 42,000 EUR for the year; finance wants a monthly burn report.",
     {"source": "email", "tags": ["budget", "decision"]}),
    # alice/work
    ("alice-role", "alice/work", at("2025-01-07", 8, 45),
     "Alice Moreau is head of data platform at Northwind Logistics and reports to the CTO, Farid.",
     {"source": "chat", "tags": ["profile"]}),
    ("alice-promotion", "alice/work", at("2025-04-22", 17),
     "Alice was promoted to VP of Engineering at Northwind; Priya takes over the data platform team.",
     {"source": "chat", "tags": ["profile"]}),
    ("alice-review-cycle", "alice/work", at("2025-02-10", 10),
     "Alice wants performance review drafts for her six reports by March 7.",
     {"source": "chat", "tags": ["deadline"]}),
    # alice/personal
    ("alice-meetings", "alice/personal", at("2025-01-09", 19),
     "Alice prefers meetings before 11am and keeps Friday afternoons free of meetings.",
     {"source": "chat", "tags": ["preference"]}),
    ("alice-diet", "alice/personal", at("2025-01-13", 12, 30),
     "Alice is vegetarian and allergic to peanuts; book restaurants accordingly.",
     {"source": "chat", "tags": ["preference", "food"]}),
    ("alice-address", "alice/personal", at("2025-02-02", 20),
     "Alice's home address for deliveries: 14 Rue des Lilas, 69003 Lyon.",
     {"source": "chat", "tags": ["private"]}),
    ("alice-phone", "alice/personal", at("2025-02-02", 20, 5),
     "Alice's personal phone number is +33 6 12 34 56 78; only for emergencies.",
     {"source": "chat", "tags": ["private"]}),
    ("alice-kids", "alice/personal", at("2025-01-19", 18),
     "Alice's kids, Léa and Hugo, have swimming on Wednesdays at 17:30; she leaves work by 17:00 then.",
     {"source": "chat", "tags": ["family"]}),
    # bob/home: the kitchen renovation
    ("bob-kitchen-budget", "bob/home", at("2025-01-11", 11),
     "Bob's kitchen renovation budget is 25,000 dollars, contractor not chosen yet.",
     {"source": "chat", "tags": ["kitchen", "budget"]}),
    ("bob-contractor", "bob/home", at("2025-02-18", 17, 40),
     "Bob chose Kowalski & Sons as the kitchen contractor; work starts March 24 and takes six weeks.",
     {"source": "chat", "tags": ["kitchen", "decision"]}),
    ("bob-countertop", "bob/home", at("2025-03-02", 10, 15),
     "Bob picked a light oak countertop over quartz because the quartz lead time was 10 weeks.",
     {"source": "chat", "tags": ["kitchen"]}),
    ("bob-kitchen-done", "bob/home", at("2025-05-09", 18),
     "Kitchen renovation finished on May 9, one week late; final bill 26,900 EUR.",
     {"source": "chat", "tags": ["kitchen", "budget"]}),
    ("bob-wifi", "bob/home", at("2025-01-25", 21),
     "Bob's home wifi password is blue-otter-1987 (guest network).",
     {"source": "chat", "tags": ["private"]}),
    # bob/running
    ("bob-race", "bob/running", at("2025-01-06", 7, 30),
     "Bob signed up for the Amsterdam half marathon on June 15; goal time under 1:50.",
     {"source": "chat", "tags": ["race", "goal"]}),
    ("bob-knee", "bob/running", at("2025-03-18", 20),
     "Bob's left knee hurts after long runs; the physio says reduce mileage for two weeks.",
     {"source": "chat", "tags": ["injury"]}),
    ("bob-race-result", "bob/running", at("2025-06-15", 14),
     "Bob finished the Amsterdam half marathon in 1:47:32, a personal best.",
     {"source": "chat", "tags": ["race"]}),
    # carmen/thesis
    ("carmen-topic", "carmen/thesis", at("2025-01-10", 15),
     "Carmen's thesis: passive acoustic monitoring of coral reef health with hydrophones in the Red Sea.",
     {"source": "chat", "tags": ["thesis"]}),
    ("carmen-journal", "carmen/thesis", at("2025-02-14", 16),
     "Carmen plans to submit the first paper to Marine Ecology Progress Series in April.",
     {"source": "chat", "tags": ["paper", "deadline"]}),
    ("carmen-journal-switch", "carmen/thesis", at("2025-04-08", 11),
     "Carmen switched the first paper's journal to PLOS ONE after her supervisor's advice; "
     "submission by May 2.",
     {"source": "chat", "tags": ["paper", "decision"]}),
    ("carmen-supervisor", "carmen/thesis", at("2025-01-10", 15, 20),
     "Carmen's supervisor is Prof. Okafor; they meet every second Tuesday.",
     {"source": "chat", "tags": ["people"]}),
    ("carmen-defense", "carmen/thesis", at("2025-06-20", 10),
     "Carmen's thesis defense is tentatively set for November 2025.",
     {"source": "email", "tags": ["deadline"]}),
    # dmitri/travel
    ("dmitri-lisbon", "dmitri/travel", at("2025-02-20", 9),
     "Dmitri is going to Lisbon for the data conference, April 14 to 17; hotel near Cais do Sodré.",
     {"source": "email", "tags": ["trip"]}),
    ("dmitri-seat", "dmitri/travel", at("2025-01-14", 13),
     "Dmitri always wants an aisle seat and a vegetarian meal on flights.",
     {"source": "chat", "tags": ["preference"]}),
    ("dmitri-passport", "dmitri/travel", at("2025-03-01", 18),
     "Dmitri's passport expires in August 2025; renew before the Japan trip.",
     {"source": "chat", "tags": ["documents"]}),
    ("dmitri-japan", "dmitri/travel", at("2025-05-05", 20),
     "Dmitri booked Japan for September: Tokyo four nights, Kyoto three, Osaka two.",
     {"source": "email", "tags": ["trip"]}),
]

# -- routine notes: templates with slots, drawn by a seeded generator ------------------------------

PEOPLE = ["Priya", "Tom", "Sam", "Alice", "Farid", "Nadia"]
ATLAS_TOPICS = [
    "consumer lag on the tracking topic", "schema registry migration", "the dead-letter queue",
    "dashboard latency", "partition count for shipment events", "the replay tool",
    "EU data residency", "alerting thresholds", "the batch job shutdown plan", "load test results",
    "cost of the managed cluster", "exactly-once delivery for invoices",
]
INCIDENTS = [
    "consumer lag on the tracking topic", "the dead-letter queue", "a schema registry outage",
    "a full disk on a broker", "a bad alerting threshold", "a stuck partition rebalance",
]
ATLAS_TEMPLATES = [
    "Standup: {p1} is blocked on {topic}; {p2} will pair on it {day}.",
    "Decision: {topic} handled by {p1}, review with {p2} on {day}.",
    "Incident: {incident} caused a {minutes}-minute delay in tracking updates; {p1} wrote the postmortem.",
    "{p1} shared load test numbers: {kevents}k events per second at p99 {p99} ms.",
    "Design review of {topic}: {p2} asked for a rollback plan before {day}.",
    "Weekly sync: {closed} tickets closed, {open} open; main risk is {topic}.",
    "{p1} proposed dropping {topic} from the first milestone; {p2} agreed.",
]
ALICE_WORK_TEMPLATES = [
    "Alice asked for a summary of {topic} before her 1:1 with Farid on {day}.",
    "Alice's 1:1 with {p1}: wants more ownership of {topic}.",
    "Alice is preparing the board slide on {topic}; numbers due {day}.",
    "Reminder for Alice: approve {p1}'s expense report ({amount} EUR) by {day}.",
    "Alice flagged hiring: one senior data engineer, interviews with {p2} on {day}.",
    "Alice wants the team offsite in {city} in {month}.",
]
ALICE_PERSONAL_TEMPLATES = [
    "Alice booked dinner at {restaurant} on {day} for {guests} people.",
    "Alice asked to be reminded to call her mother on {day}.",
    "Alice is reading '{book}' and wants similar recommendations.",
    "Alice's yoga class moved to {weekday} evenings.",
    "Alice needs a birthday present for {kid} by {day}; budget {gift} EUR.",
]
BOB_HOME_TEMPLATES = [
    "Kitchen: {trade} sent an invoice for {amount} EUR ({item}).",
    "Kitchen: the {item} work is scheduled for {day}.",
    "Bob asked to compare prices for {product}; cheapest so far {price} EUR.",
    "Kitchen progress: {item} done, {item2} starts {day}.",
    "Bob needs to be home on {day} for the {item} inspection.",
    "Garden: Bob planted {plant} along the back fence.",
]
RUN_TEMPLATES = [
    "Run: {km_easy} km easy in {easy_minutes} minutes, felt {feel}.",
    "Long run: {km_long} km along the canal, average pace {easy_pace} per km.",
    "Intervals: {reps} x 800 m at {fast_pace} per km, felt {feel}.",
    "Bob skipped today's run: {excuse}.",
    "Tempo run: {km_tempo} km at {tempo_pace} per km; heart rate {hr} average.",
]
CARMEN_TEMPLATES = [
    "Carmen processed {hours} hours of hydrophone recordings from site {site}.",
    "Carmen's classifier for {sound} reached {acc}% accuracy on the validation set.",
    "Meeting with Prof. Okafor: rewrite the {section} section, focus on {sound}.",
    "Carmen found a gap in the recordings at site {site} from {day}; battery failure.",
    "Carmen wants to cite {author} on snapping shrimp choruses in the {section}.",
    "Field trip to site {site} planned for {day}: replace two hydrophones.",
]
DMITRI_TEMPLATES = [
    "Dmitri asked for train times from {city} to {city2} on {day}.",
    "Dmitri's expense claim for the {city} trip: {amount} EUR, receipts uploaded.",
    "Dmitri prefers hotels with a gym; shortlist for {city}: {options} options.",
    "Dmitri wants restaurant ideas in {city} for a team dinner of {guests}.",
]
FILL = {
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "the 14th"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday"],
    "city": ["Lyon", "Porto", "Lisbon", "Berlin", "Amsterdam", "Madrid", "Vienna"],
    "month": ["May", "June", "September"],
    "restaurant": ["Le Bouchon", "Maison Clovis", "La Mère Brazier", "Daniel et Denise"],
    "book": ["The Overstory", "Klara and the Sun", "Piranesi", "The Dispossessed"],
    "kid": ["Léa", "Hugo"],
    "item": ["cabinets", "tiles", "wiring", "plumbing", "lighting", "flooring"],
    "product": ["a dishwasher", "an induction hob", "bar stools", "a range hood", "pendant lights"],
    "plant": ["lavender", "tomatoes", "a cherry tree", "rosemary"],
    "feel": ["good", "heavy legs", "strong", "tired", "easy"],
    "excuse": ["rain and wind", "late meeting", "knee felt stiff", "family dinner"],
    "sound": ["snapping shrimp", "parrotfish grazing", "boat noise", "fish choruses"],
    "site": ["A", "B", "C", "D"],
    "section": ["methods", "discussion", "introduction", "results"],
    "author": ["Au and Banks", "Lillis et al.", "Freeman and Freeman"],
}
TRADES = {
    "cabinets": "Kowalski & Sons", "tiles": "the tiler", "wiring": "the electrician",
    "plumbing": "the plumber", "lighting": "the electrician", "flooring": "Kowalski & Sons",
}
ROUTINE = [
    # namespace, templates, how many, metadata source, first day, last day
    ("team/atlas", ATLAS_TEMPLATES, 70, "meeting", "2025-01-09", "2025-06-27"),
    ("alice/work", ALICE_WORK_TEMPLATES, 40, "chat", "2025-01-07", "2025-06-27"),
    ("alice/personal", ALICE_PERSONAL_TEMPLATES, 22, "chat", "2025-01-10", "2025-06-27"),
    ("bob/home", BOB_HOME_TEMPLATES, 36, "chat", "2025-02-19", "2025-05-08"),
    ("bob/running", RUN_TEMPLATES, 55, "app", "2025-01-07", "2025-06-13"),
    ("carmen/thesis", CARMEN_TEMPLATES, 42, "chat", "2025-01-13", "2025-06-27"),
    ("dmitri/travel", DMITRI_TEMPLATES, 20, "email", "2025-01-15", "2025-06-27"),
]


def pace(rng: random.Random, low: int, high: int) -> str:
    seconds = rng.randint(low, high)
    return f"{seconds // 60}:{seconds % 60:02d}"


def fill(rng: random.Random, template: str, user: str) -> str:
    values: dict[str, object] = {k: rng.choice(v) for k, v in FILL.items()}
    values["item2"] = rng.choice([x for x in FILL["item"] if x != values["item"]])
    values["city2"] = rng.choice([x for x in FILL["city"] if x != values["city"]])
    values["trade"] = TRADES[str(values["item"])]
    people = [p for p in PEOPLE if p.lower() != user]
    p1, p2 = rng.sample(people, 2)
    km_easy = rng.choice([5, 6, 8, 10])
    values.update(
        p1=p1, p2=p2, topic=rng.choice(ATLAS_TOPICS), incident=rng.choice(INCIDENTS),
        amount=rng.randrange(80, 4000, 10), price=rng.randrange(90, 1400, 5),
        guests=rng.randint(3, 12), gift=rng.randrange(20, 80, 5), options=rng.randint(2, 6),
        minutes=rng.randint(4, 95), closed=rng.randint(6, 31), open=rng.randint(3, 24),
        kevents=rng.randint(20, 180), p99=rng.randint(40, 900), hours=rng.randint(6, 120),
        acc=rng.randint(71, 94), reps=rng.randint(5, 10), hr=rng.randint(150, 172),
        km_easy=km_easy, easy_minutes=km_easy * rng.randint(330, 390) // 60,
        km_long=rng.choice([14, 16, 18, 19, 21]), km_tempo=rng.choice([6, 8, 10]),
        easy_pace=pace(rng, 330, 390), tempo_pace=pace(rng, 285, 310),
        fast_pace=pace(rng, 250, 280),
    )
    return template.format(**values)


def routine_notes(rng: random.Random) -> list[tuple[str, str, datetime, str, dict[str, object]]]:
    out = []
    for namespace, templates, count, source, first, last in ROUTINE:
        prefix = namespace.replace("/", "-")
        user = namespace.split("/")[0]
        start, end = at(first, 0), at(last, 0)
        span = (end - start).total_seconds()
        whens = []
        for _ in range(count):
            offset = rng.uniform(0, span)
            when = (start + timedelta(seconds=offset)).replace(second=0, microsecond=0)
            whens.append(when.replace(hour=7 + int(offset) % 13))
        seen: set[str] = set()
        for i, when in enumerate(sorted(whens), 1):
            text = fill(rng, rng.choice(templates), user)
            while text in seen:
                text = fill(rng, rng.choice(templates), user)
            seen.add(text)
            out.append((f"{prefix}-{i:03d}", namespace, when, text, {"source": source}))
    return out


def build() -> str:
    rng = random.Random(20250106)
    notes = STORY + routine_notes(rng)
    notes.sort(key=lambda n: (n[2], n[0]))
    lines = []
    for note_id, namespace, when, text, metadata in notes:
        user = namespace.split("/")[0]
        meta = {"user": user, **metadata}
        line = {
            "id": note_id,
            "namespace": namespace.split("/"),
            "time": when.isoformat().replace("+00:00", "Z"),
            "text": text,
            "metadata": meta,
        }
        lines.append(json.dumps(line, ensure_ascii=False, sort_keys=False))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs")
    args = parser.parse_args()
    text = build()
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{OUT} differs from the generator", file=sys.stderr)
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} notes to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
