"""Recall probes written for Hermes (none taken from a benchmark): what a user told, found later
without the words it was told in.

Two sets, each of short dated exchanges inserted into LoCoMo's conversations as sessions of
their own (two turns: one person tells it, the other answers), then asked about weeks later:

* ``implicit``: a **cue** ("I sold my car last month and now bike everywhere") and a **later
  message** that depends on it and shares no content word with the exchange ("My thighs are
  killing me after the hill on the way to the office"), in everyday language; each tagged with
  its domain (habits, decisions, health, family, work, places) and kind (causal, preference,
  state change). The later message is what the user says; the cue turn is the evidence.
* ``paraphrase``: a statement and a question asking for it in other words ("My daughter started
  violin lessons" / "What instrument is my kid learning?").

"Shares no content word" is checked, not hoped for (:func:`shared_words`): Hermes's own query
plan of the later message (stopwords out) against an FTS5 table of the exchange with Hermes's
tokenizer (Porter stems: "teacher" and "teaches" are one word there), so that a word match is
never what finds the cue. ``python scripts/recall_probes.py`` lists any pair that does.

Each probe goes to one conversation (the i-th probe of a set to the (i mod 10)-th, so both LoCoMo
halves hold half of each set), said by one of its two speakers (alternating), answered by the
other, at a date drawn between the conversation's first session and three weeks before its last
(a fixed seed: every run inserts the same sessions). Questions are asked the day after the last
session, as LoCoMo's are. The inserted sessions are numbered from 101 (dia ids ``D101:1``).
"""

from __future__ import annotations

import dataclasses
import random
import sqlite3
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import locomo_data as data

ROOT = Path(__file__).resolve().parents[1]

FIRST_SESSION = 101  # inserted sessions are numbered from here (LoCoMo's stop at 35)
SEED = 35
# Probe categories (beside LoCoMo's 1-4 in reports): the kind of link from cue to later message.
CATEGORIES = {11: "causal", 12: "preference", 13: "state change", 21: "paraphrase",
              31: "refers back"}
KIND = {"causal": 11, "preference": 12, "state": 13}


@dataclass(frozen=True)
class Probe:
    set: str  # "implicit" or "paraphrase"
    kind: str  # causal / preference / state (implicit), paraphrase
    domain: str  # habits, decisions, health, family, work, places
    cue: str  # what is told (the evidence turn)
    later: str  # the later message, or the question


# (kind, domain, cue, later message): the later message depends on the cue, shares no word
IMPLICIT: list[tuple[str, str, str, str]] = [
    ("state", "habits", "I quit coffee two weeks ago, the jitters were ruining my afternoons.",
     "The barista looked heartbroken when I ordered a chamomile this morning."),
    ("causal", "health", "Since my back started aching I sleep on the floor with just a thin mat.",
     "Guests keep asking why there's no mattress in my bedroom."),
    ("preference", "habits",
     "I can't stand crowds, so I only go grocery shopping right when the store opens.",
     "Being first through the supermarket doors at seven is the best part of my Saturday."),
    ("state", "habits", "I sold my car last month and now bike everywhere.",
     "My thighs are killing me after the hill on the way to the office."),
    ("causal", "habits", "Ever since the break-in we lock the back gate every single night.",
     "Forgot the padlock key again and had to climb over the fence at midnight."),
    ("preference", "habits", "I only read paper books, screens give me headaches.",
     "My nephew gave me an e-reader for my birthday and I don't have the heart to tell him."),
    ("state", "habits", "I started waking up at five to run before work.",
     "By nine at night I can barely keep my eyes open lately."),
    ("state", "family", "We stopped eating meat in January, the whole household.",
     "Grandma was confused when we brought lentil stew to her barbecue."),
    ("causal", "habits",
     "My phone kept me up till two every night, so now it charges in the kitchen.",
     "I bought an old-fashioned alarm clock for the nightstand."),
    ("preference", "places", "I hate driving on highways, I always take the back roads.",
     "The trip to my aunt's took nearly four hours because I avoided the interstate."),
    ("state", "health", "The doctor told me I'm allergic to shellfish.",
     "At the wedding I had to skip the shrimp cocktail entirely."),
    ("causal", "health", "I twisted my knee skiing, so no stairs for a while.",
     "Glad my new apartment building has an elevator."),
    ("state", "health", "I've been diagnosed with diabetes, type two.",
     "Carrying a little bag of glucose tablets in my jacket now."),
    ("state", "health", "I got my braces put on yesterday.",
     "Corn on the cob at the picnic was a total disaster for me."),
    ("causal", "health",
     "My eyes have been terrible since I turned forty, I finally got glasses.",
     "Keep leaving my specs on top of my head and then searching the house for them."),
    ("preference", "health", "Needles terrify me, I nearly faint at the clinic.",
     "The nurse let me squeeze a stress ball during my flu jab."),
    ("state", "family", "I'm pregnant! Due in March.",
     "None of my jeans fit anymore and I'm craving pickles at midnight."),
    ("state", "health", "I've been sober for six months now.",
     "At the office party I stuck to sparkling water and still had fun."),
    ("causal", "health",
     "My migraines get worse with bright light, so I wear sunglasses indoors sometimes.",
     "My boss asked if I was hungover because of my shades in the meeting."),
    ("state", "health", "I've got a hearing aid now, my left ear was getting bad.",
     "The new batteries for my little earpiece cost more than I expected."),
    ("preference", "health", "I'm lactose intolerant, so dairy is out.",
     "The café finally started stocking oat milk for my lattes."),
    ("state", "health", "I broke my wrist falling off a ladder.",
     "Typing with one hand is so slow, sorry for the short replies."),
    ("causal", "health",
     "My blood pressure was high at the checkup, so I'm cutting salt.",
     "Everything tastes bland now but my cardiologist is happy."),
    ("state", "health", "I've started therapy every Thursday.",
     "My counselor suggested I keep a journal about the week's worries."),
    ("preference", "health", "I have celiac disease, gluten makes me really sick.",
     "Found a bakery downtown that sells bread I can actually eat."),
    ("state", "family", "My daughter just started kindergarten.",
     "Packing tiny lunchboxes every morning is my new routine."),
    ("state", "family", "My mom moved in with us after her surgery.",
     "The guest room smells like lavender lotion these days."),
    ("state", "family", "We're getting a divorce, it's been a hard year.",
     "Signing the papers at the lawyer's office felt surreal."),
    ("state", "family", "My son got into college across the country.",
     "His bedroom is so quiet now, I keep peeking in."),
    ("preference", "family", "My husband hates seafood, so we never order it.",
     "I finally had oysters on my business trip, alone."),
    ("state", "family", "We adopted a rescue greyhound last weekend.",
     "Walks around the park at dawn are part of my life now."),
    ("causal", "family",
     "My brother and I haven't spoken since the argument at Dad's funeral.",
     "He didn't even call on my birthday, which says it all."),
    ("state", "family", "My grandpa has dementia now, he doesn't always recognise me.",
     "He called me by my mother's name three times during the visit."),
    ("state", "family", "We're expecting twins in the fall!",
     "Looking at double strollers is making my head spin."),
    ("state", "decisions", "We decided to homeschool the kids this year.",
     "The kitchen table is covered in worksheets and math blocks."),
    ("state", "family", "My sister got engaged on a hike in the mountains.",
     "I'm the maid of honor, so I'm planning a bachelorette weekend."),
    ("preference", "family", "My kids refuse to eat anything green.",
     "I blended spinach into the pancakes and nobody noticed."),
    ("causal", "family",
     "My father-in-law broke his hip, so we visit him every Sunday.",
     "The drive out to the rehab center takes an hour each way."),
    ("state", "family", "Our youngest finally sleeps through the night.",
     "I feel like a new person after eight straight hours."),
    ("state", "family", "My niece is living with us while she studies nursing.",
     "There are anatomy textbooks all over our couch."),
    ("state", "work", "I got laid off on Friday.",
     "Spent the whole morning polishing my resume and cover letter."),
    ("state", "work", "I got promoted to team lead.",
     "Now I spend half my day in one-on-ones with my reports."),
    ("state", "work", "I started working from home full time in March.",
     "Our cat has claimed the spot next to my laptop."),
    ("state", "decisions", "I'm going back to school to become a nurse.",
     "Flashcards about bones are taped all over my bathroom mirror."),
    ("causal", "work", "My commute is ninety minutes, so I listen to audiobooks.",
     "Finished three novels this week on the train alone."),
    ("preference", "work", "I refuse to answer work emails after six.",
     "My manager pinged me at nine last night and I just ignored it."),
    ("state", "work", "I quit my job at the bank to start a bakery.",
     "The oven at the shop broke on our first Saturday open."),
    ("state", "work", "I've been put on a night shift at the hospital.",
     "Blackout curtains are the best thing I bought all year."),
    ("causal", "work", "My company is moving the office to the other side of town.",
     "Now I have to leave the house at six thirty to beat traffic."),
    ("state", "work", "I passed the bar exam!",
     "Got sworn in at the courthouse yesterday with my parents watching."),
    ("causal", "decisions", "I turned down the offer from the startup, too risky.",
     "Their founders just announced a big funding round, oh well."),
    ("state", "work", "Our team is switching everything to Python this quarter.",
     "Spent my evening on a course about list comprehensions and decorators."),
    ("state", "work", "I'm starting my own consulting business.",
     "Invoices and tax forms are eating my whole weekend."),
    ("causal", "work",
     "My boss micromanages everything, so I document every decision in writing.",
     "Sent another recap after the call, just to cover myself."),
    ("state", "work", "I'm retiring at the end of the month.",
     "They gave me a gold watch and a cake at the farewell lunch."),
    ("state", "places", "We moved to a tiny village in the hills.",
     "The nearest supermarket is a forty minute drive now."),
    ("state", "places", "I'm living in Berlin now.",
     "Learning all the U-Bahn lines is harder than I thought."),
    ("causal", "places", "Our building's elevator has been broken for weeks.",
     "Carrying the groceries up seven floors is my workout now."),
    ("preference", "places", "I love the beach but I burn in ten minutes.",
     "I brought a giant umbrella and SPF fifty to the coast."),
    ("state", "places", "We bought a house with a huge garden.",
     "I spent Sunday pulling weeds until my shoulders hurt."),
    ("state", "places", "I grew up on a farm in Iowa.",
     "City kids never believe me when I say I could drive a tractor at eleven."),
    ("state", "places", "We rented a cabin by the lake for the summer.",
     "Fell asleep to loons calling across the water."),
    ("state", "places", "Our new flat is right above a bakery.",
     "I wake up every day to the smell of croissants."),
    ("causal", "places", "My neighborhood flooded last month.",
     "The insurance adjuster finally came to look at the basement."),
    ("state", "places", "I'm spending the winter in Thailand.",
     "Christmas dinner was pad see ew on the beach."),
    ("state", "decisions", "We decided not to have a TV in the house anymore.",
     "The kids have been playing board games every evening instead."),
    ("state", "decisions", "I'm selling everything and traveling for a year.",
     "All my belongings fit in one backpack now."),
    ("causal", "decisions",
     "We chose the school across town because of its music program.",
     "The morning drive is long but she loves her violin teacher."),
    ("preference", "habits", "I only buy secondhand clothes, fast fashion is awful.",
     "Found a wool coat at the thrift store for eight dollars."),
    ("state", "habits", "I journal every night before bed.",
     "Just filled my fourth notebook this year."),
    ("state", "habits", "I've been doing yoga every morning at six.",
     "My hamstrings are finally loose enough to touch my toes."),
    ("causal", "habits", "Since the power outage I keep candles in every drawer.",
     "Found matches in the silverware tray again, my partner laughed."),
    ("state", "decisions", "I deleted all my social media.",
     "I had no idea about my cousin's engagement until the wedding invite came."),
    ("state", "habits", "I started learning Japanese for our trip.",
     "Kanji practice takes up my whole lunch break."),
    ("state", "health", "I stopped smoking three weeks ago.",
     "I keep chewing gum like a maniac and my jaw aches."),
    ("causal", "habits", "I'm trying to save money, so I cook every meal at home.",
     "Sunday's batch produced twelve containers of chili for the fridge."),
    ("state", "decisions", "We decided to sell the piano.",
     "The living room feels huge with that corner empty."),
    ("preference", "habits", "I can't sleep without white noise.",
     "Forgot my little fan machine at the hotel, terrible night."),
    ("causal", "places",
     "My car broke down on the highway, so I've been taking the bus.",
     "The driver on route twelve knows my name now."),
    ("causal", "family",
     "The neighbor's dog bit my son, so he's scared of them now.",
     "He hid behind me when a poodle trotted by at the park."),
    ("causal", "places", "We got robbed last year, so we put cameras everywhere.",
     "Watched a raccoon steal the cat food on the doorbell footage."),
    ("causal", "habits", "I failed my driving test because of parallel parking.",
     "Practising squeezing between two cones in the empty lot every evening."),
    ("causal", "places", "Our basement is damp, so all the books went to the attic.",
     "Climbing the ladder to find a novel is getting old."),
    ("causal", "places",
     "My landlord raised the rent by thirty percent, so we're looking elsewhere.",
     "Toured four apartments today and they were all tiny."),
    ("causal", "places",
     "I got a parking ticket every day last week, so now I take the train.",
     "The station is only a ten minute walk from home."),
    ("causal", "work", "My laptop died during the storm, so I lost my thesis draft.",
     "Rewriting chapter two from memory is soul-destroying."),
    ("preference", "habits", "I hate cilantro, it tastes like soap to me.",
     "I picked every green leaf out of my tacos at lunch."),
    ("preference", "places", "I'm terrified of flying.",
     "Taking the overnight train to Rome instead of the plane."),
    ("preference", "habits", "Horror movies give me nightmares, I can't watch them.",
     "I hid in the kitchen during the whole zombie marathon at my friend's."),
    ("preference", "habits", "I'm a huge fan of the Chicago Cubs.",
     "Wrigley was electric last night, we won in the ninth."),
    ("preference", "habits", "I love spicy food, the hotter the better.",
     "The waiter warned me about the ghost pepper wings and I ordered double."),
    ("preference", "habits", "I only wear black, it makes mornings easier.",
     "My closet looks like a funeral home, my niece says."),
    ("preference", "habits", "I'm not a dog person at all, cats all the way.",
     "Our neighbor's labrador jumped on me and I froze."),
    ("preference", "places", "I'd rather hike than lie on a beach any day.",
     "We spent the vacation on mountain trails and I loved every minute."),
    ("preference", "places", "I can't stand the cold.",
     "Wearing two sweaters and thermal socks indoors already."),
    ("state", "habits", "I shaved my head last weekend.",
     "My scalp got sunburned at the soccer game."),
    ("state", "habits", "I got my first tattoo, a small swallow on my wrist.",
     "Still putting lotion on the new ink three times a day."),
    ("state", "habits", "I finally got my driver's license!",
     "Drove my grandmother to church this morning, all by myself."),
    ("state", "family", "We just got engaged!",
     "Spent the evening looking at venues and cake tastings."),
    ("state", "places", "I'm now a US citizen.",
     "Voted for the first time in the primary this morning."),
    ("state", "health", "I lost twenty pounds since the spring.",
     "Had to buy a new belt, the old one has no holes left."),
    ("state", "family", "My dad passed away in April.",
     "Cleaning out his garage is the hardest thing I've done."),
    ("state", "habits", "I became vegetarian after that documentary.",
     "Ordered the falafel at the steakhouse and got weird looks."),
    ("state", "family", "We had a baby girl on Tuesday!",
     "Changing diapers at three in the morning is my life now."),
    ("state", "family", "I became a grandmother last week!",
     "Knitting a tiny yellow hat for the little one."),
    ("state", "family", "My husband and I separated in the summer.",
     "Eating dinner alone at the big table still feels strange."),
    ("state", "habits", "I dyed my hair bright purple.",
     "My students keep calling me the grape teacher."),
    ("state", "decisions", "I finally finished paying off my student loans.",
     "First month with nothing due, I treated myself to a nice dinner."),
    ("state", "places", "We got solar panels on the roof.",
     "Our electricity bill this month was three dollars."),
    ("state", "habits", "I'm learning to play the cello.",
     "My fingertips are sore and the neighbors must hate me."),
    ("state", "decisions", "I'm not going to the reunion this year.",
     "Saw all the photos online and felt a bit left out."),
    ("state", "decisions", "We picked the blue tiles for the bathroom.",
     "The contractor finished the shower wall yesterday and it looks amazing."),
    ("causal", "decisions", "I decided to rent instead of buy for a few more years.",
     "Glad I'm not the one paying for the new roof when the landlord fixes it."),
    ("state", "decisions", "We're skipping Christmas with the in-laws this time.",
     "Just the four of us and a rotisserie chicken on the twenty-fifth."),
    ("state", "decisions", "I signed up for a marathon in October.",
     "Did eighteen miles this morning and my toenail is black."),
    ("causal", "decisions", "We decided to get our son a tutor for chemistry.",
     "His last test came back with a B plus, huge improvement."),
    ("state", "decisions", "I chose the electric car over the hybrid.",
     "Found a charger at the mall that's free for two hours."),
    ("state", "decisions", "We're keeping the wedding tiny, just family.",
     "Only twenty chairs to set up in my parents' backyard."),
    ("state", "decisions", "I've decided to learn to swim at forty.",
     "Kicked across the shallow end with a foam board today."),
    ("state", "decisions", "We turned the spare room into a home gym.",
     "The treadmill is where the guest bed used to be."),
    ("state", "habits", "I walk the dog along the canal every evening.",
     "A heron stood on the towpath again at sunset."),
    ("state", "family", "Every Friday I call my grandma in Manila.",
     "She told me the mango tree finally fruited."),
    ("state", "habits", "I bake bread every weekend now.",
     "My sourdough starter has a name, it's called Gerald."),
    ("state", "habits", "I've been volunteering at the animal shelter on Saturdays.",
     "A three-legged kitten fell asleep on my lap during my shift."),
    ("state", "habits", "I've been swimming laps before work.",
     "My hair smells like chlorine all day at the office."),
    ("state", "habits", "I play chess online before bed.",
     "Lost five games in a row to a twelve-year-old from Norway."),
    ("state", "habits", "I fast until noon every day.",
     "The smell of my colleague's breakfast burrito was torture at ten."),
    ("state", "habits", "I started gardening on the balcony.",
     "The first cherry tomatoes are turning red."),
    ("state", "health", "My knee surgery is scheduled for the ninth.",
     "The hospital sent me a list of what not to eat the evening before."),
    ("state", "health", "I've got long covid, I'm exhausted all the time.",
     "Climbing one flight of stairs still leaves me needing a nap."),
    ("causal", "health", "The dentist says I grind my teeth at night.",
     "Wearing a plastic guard to bed now, very glamorous."),
    ("causal", "health", "I've been having panic attacks on the subway.",
     "Walking forty blocks to work feels safer right now."),
    ("causal", "health", "My cholesterol is through the roof.",
     "Oatmeal every breakfast and no more bacon."),
    ("state", "health", "I'm recovering from a concussion.",
     "Screens and bright lights still make me dizzy."),
    ("causal", "health", "I've got asthma, cold air sets it off.",
     "Always carry my inhaler when I go out skating."),
    ("state", "family", "My parents are visiting from Lagos for a month.",
     "Mom has taken over my kitchen completely."),
    ("state", "family", "My son is learning to drive.",
     "Sat white-knuckled in the passenger seat while he merged onto the freeway."),
    ("state", "family", "My teenage daughter won't talk to me lately.",
     "Got a one-word text back after my long message, progress I guess."),
    ("state", "family", "We're fostering a baby boy for a few months.",
     "The social worker visits on Thursday to check how he's settling."),
    ("state", "family", "My wife is deployed overseas until spring.",
     "Video calls at odd hours because of the time difference."),
    ("state", "work", "I'm presenting to the board next Tuesday.",
     "Rehearsed my slides in front of the mirror twice tonight."),
    ("state", "work", "I've started teaching a night class at the community college.",
     "Grading thirty essays on the bus home."),
    ("state", "work", "Our startup just ran out of funding.",
     "Packing up my desk and saying goodbye to everyone today."),
    ("causal", "work", "I've been assigned to the Tokyo project for six months.",
     "Jet lag has me wide awake at three every morning."),
    ("state", "work", "I'm on parental leave until September.",
     "Haven't opened my inbox in weeks and it feels great."),
    ("state", "places", "I just moved to Seattle.",
     "It has drizzled every single day since the boxes arrived."),
    ("causal", "places", "We live right next to the airport now.",
     "Conversations on the patio pause every few minutes for the jets."),
    ("causal", "places", "Our apartment has no air conditioning.",
     "Slept with wet towels on my legs during the heatwave."),
    ("state", "places", "I'm renting a room in a shared house with five others.",
     "There's a rota on the fridge for cleaning the one shower."),
    ("state", "places", "We bought a sailboat and live on it now.",
     "Everything in our tiny galley has to be strapped down."),
    ("causal", "health", "Since the scare with my heart, I take the stairs everywhere.",
     "Nine floors up to my desk and I'm barely winded anymore."),
    ("causal", "places", "My bike got stolen at the station, so I walk now.",
     "Forty minutes each way, my podcasts are all caught up."),
    ("causal", "places", "The hail destroyed our car's windshield.",
     "The repair shop says the glass won't come in until next week."),
    ("causal", "places", "We missed our flight because of the strike, so we drove.",
     "Twelve hours in a rental with two toddlers, never again."),
    ("preference", "habits", "I'm a night owl, mornings are torture.",
     "My eight a.m. lecture is a disaster, I nodded off twice."),
    ("preference", "habits", "I love thunderstorms, I sit on the porch to watch.",
     "Yesterday's lightning show was spectacular from my rocking chair."),
    ("preference", "habits", "I'm a minimalist, I own maybe a hundred things.",
     "My mother keeps sending me knickknacks and I have nowhere to put them."),
    ("state", "health", "I'm colorblind, red and green look the same to me.",
     "Picked out a tie my wife says clashes horribly with the suit."),
    ("state", "family", "My grandmother left me her old piano.",
     "A tuner came by and said the keys need new felt."),
    ("state", "habits", "I've just become a certified scuba diver.",
     "Saw a sea turtle at eighteen meters down off Cozumel."),
    ("state", "habits", "I've been meditating for twenty minutes each morning.",
     "Sat still on the cushion today and my mind finally went quiet."),
    ("state", "decisions", "We're going to let our daughter take a gap year.",
     "She leaves for Peru on Monday to volunteer at a school."),
    ("state", "decisions", "I'm switching to a standing desk.",
     "My calves ache after a full day upright."),
    ("state", "decisions", "I bought a motorcycle.",
     "Wore my new leather jacket on the ride to the coast."),
    ("causal", "places", "My wallet was stolen on the tram.",
     "Spent the whole afternoon on hold with the card company."),
    ("state", "work", "I'm the new head chef at the restaurant.",
     "Sixteen-hour days on the line, but the menu is finally mine."),
    ("state", "family", "My cousin is staying on our sofa until she finds a job.",
     "Three weeks now and still no interviews, poor thing."),
    ("state", "health", "I've developed a bad allergy to cats.",
     "Sneezed through the entire visit at my aunt's place."),
    ("state", "places", "I commute by ferry across the bay now.",
     "Spotted dolphins from the deck on the way in today."),
    ("state", "habits", "I gave up sugar for Lent.",
     "Passed on the birthday cake at work and everyone stared."),
    ("causal", "family", "The library near us closed, so the kids read on tablets now.",
     "Arguing over screen time every single evening."),
    ("state", "family", "We switched the kids to a bilingual school.",
     "My son corrected my Spanish at dinner tonight."),
    ("preference", "habits", "I always sit in the front row, I hate missing details.",
     "The lecturer knows my name after two weeks."),
    ("state", "places", "We're renovating the kitchen for the next two months.",
     "Washing dishes in the bathtub is getting old."),
    ("causal", "health", "I'm on a strict low-sodium diet now.",
     "Read every label at the store, soup is the worst."),
]

# (domain, statement, question asking for it in other words)
PARAPHRASE: list[tuple[str, str, str]] = [
    ("family", "My sister just moved to Denver for her new job.",
     "Which city did my sibling relocate to?"),
    ("family", "I adopted a tabby kitten from the shelter on Saturday.",
     "What kind of pet did I bring home recently?"),
    ("family", "My daughter started violin lessons.", "What instrument is my kid learning?"),
    ("places", "We're flying to Portugal for our anniversary in June.",
     "Where are we going to celebrate our wedding date?"),
    ("work", "I work as a pharmacist at the hospital.", "What's my profession?"),
    ("habits", "My favourite author is Ursula Le Guin.", "Which writer do I like best?"),
    ("habits", "I drive a red Subaru Outback.", "What vehicle do I own?"),
    ("health", "I broke my ankle playing basketball.", "How did I get injured?"),
    ("family", "My son's birthday is on the twelfth of August.",
     "When does my boy turn a year older?"),
    ("health", "I'm allergic to peanuts.", "Which nut can't I eat?"),
    ("family", "My brother is a firefighter in Boston.",
     "What does my sibling do for a living?"),
    ("family", "We named the puppy Biscuit.", "What's our new dog called?"),
    ("places", "I grew up in a small town outside Manchester.",
     "Where was my childhood spent?"),
    ("family", "My husband proposed at the top of the Eiffel Tower.",
     "Where did my partner pop the question?"),
    ("work", "I run a small pottery studio.", "What kind of business do I own?"),
    ("family", "My grandmother turned ninety-five last week.", "How old is my nan?"),
    ("habits", "I'm learning Korean on an app.", "Which language am I studying?"),
    ("family", "We painted the nursery pale green.", "What colour is the baby's room?"),
    ("places", "My best friend lives in Auckland.", "Where is my closest pal based?"),
    ("work", "I take the 7:40 train to work.", "When does my commute start?"),
    ("habits", "My favourite dish is my dad's lamb curry.", "What meal do I love most?"),
    ("habits", "I play bass in a jazz trio.", "What do I do in my band?"),
    ("family", "My wife is a high school chemistry teacher.", "What's my spouse's job?"),
    ("places", "I'm saving up for a trip to Patagonia.", "Where do I dream of going?"),
    ("places", "Our rent is eighteen hundred a month.",
     "How much do we pay for the apartment?"),
    ("work", "I got a scholarship to study law at Edinburgh.",
     "Which university accepted me?"),
    ("decisions", "My car is in the shop for a new transmission.",
     "What's wrong with my vehicle?"),
    ("habits", "I volunteer at a soup kitchen on Wednesdays.",
     "Where do I help out midweek?"),
    ("family", "My father was a coal miner in Wales.", "What did my dad do for work?"),
    ("health", "I hurt my shoulder lifting boxes during the move.",
     "How did I injure my arm?"),
    ("family", "We're having a boy, due in November.", "What's the sex of our baby?"),
    ("habits", "I went to the Rolling Stones concert in Hyde Park.",
     "Which band did I see live?"),
    ("family", "My sister-in-law makes jewellery for a living.",
     "What does my brother's wife do?"),
    ("decisions", "I bought a secondhand rowing machine.",
     "What exercise equipment did I get?"),
    ("habits", "My favourite season is autumn.", "Which time of year do I like best?"),
    ("habits", "I'm reading War and Peace this winter.", "Which novel am I working through?"),
    ("family", "My uncle owns a vineyard in Sonoma.",
     "What does my relative produce in California?"),
    ("places", "We celebrated our tenth anniversary in Venice.",
     "Where did we mark a decade of marriage?"),
    ("health", "I sprained my wrist rock climbing.",
     "What injury did I get at the bouldering gym?"),
    ("family", "My daughter's teacher is Mrs. Alvarez.",
     "Who's in charge of my girl's classroom?"),
    ("habits", "I've been growing chili peppers on the windowsill.",
     "What am I cultivating indoors?"),
    ("family", "My mother was born in Kerala.", "Where does my mum come from?"),
    ("decisions", "We got a robot vacuum for the living room.",
     "What gadget cleans our floors?"),
    ("work", "I study marine biology at university.", "What's my major?"),
    ("family", "My partner's name is Priya.", "What is my girlfriend called?"),
    ("habits", "My favourite band is Radiohead.", "Which musicians do I listen to most?"),
    ("family", "I was born on Christmas Eve.", "When is my birthday?"),
    ("habits", "I drink my coffee black, no sugar.", "How do I take my morning brew?"),
    ("places", "We planted an apple tree in the backyard.",
     "What fruit will our garden give us?"),
    ("family", "I coach my son's under-ten football team.",
     "What sport do I help the kids with?"),
    ("places", "My flat is on the fourth floor.", "How high up do I live?"),
    ("habits", "I ran the Chicago marathon in four hours.", "What was my race time?"),
    ("habits", "My neighbour gave us a sourdough starter.",
     "Who supplied the yeast culture for my loaves?"),
    ("health", "I wear contact lenses, my eyesight is poor.",
     "Do I need anything to see properly?"),
    ("family", "My grandfather fought in Korea.", "Which war did my granddad serve in?"),
    ("family", "Our wedding is on the fifth of May.", "When are we getting married?"),
    ("work", "I'm a night nurse in the ICU.", "What shift do I work at the hospital?"),
    ("family", "My dog is a border collie.", "What breed is my pup?"),
    ("habits", "I can speak French and Arabic.", "Which languages am I fluent in?"),
    ("family", "I've been knitting a scarf for my dad.", "What am I making for my father?"),
    ("family", "My kids go to Lincoln Elementary.",
     "Where do my children attend school?"),
    ("habits", "I'm training for a triathlon.", "What race am I preparing for?"),
    ("places", "We drove Route 66 last summer.",
     "Which famous highway did we do a road trip on?"),
    ("habits", "My favourite film is Spirited Away.", "Which movie do I love most?"),
    ("work", "I used to be a professional ballet dancer.", "What was my old career?"),
    ("health", "My son is allergic to bee stings.", "What insect is my boy sensitive to?"),
    ("places", "We keep chickens in the garden.", "What animals do we raise at home?"),
    ("family", "My sister is studying medicine in Prague.",
     "Where is my sibling at university?"),
    ("places", "My hometown is Cork.", "Which Irish city am I from?"),
    ("habits", "I collect vintage postcards.", "What's my hobby?"),
    ("work", "I work the early shift at the bakery, four to noon.",
     "What hours do I keep at my job?"),
    ("family", "My husband is Brazilian.", "Where is my spouse from?"),
    ("health", "I'm afraid of spiders.", "What creature scares me?"),
    ("family", "My twins are starting first grade.",
     "Which year are my kids entering at school?"),
    ("places", "We spent New Year's in Reykjavik.", "Where did we ring in January?"),
    ("family", "I lost my wedding ring at the beach.",
     "What jewellery did I misplace on the sand?"),
    ("decisions", "My car is a hybrid, great on gas.",
     "What kind of engine does my vehicle have?"),
    ("habits", "I do pilates on Tuesday evenings.", "What workout do I have each week?"),
    ("family", "My father-in-law is a retired judge.",
     "What did my wife's dad do before he stopped working?"),
    ("habits", "I'm vegetarian since college.", "Do I eat meat?"),
    ("habits", "We host game night every other Friday.",
     "How often do our friends come over to play?"),
    ("work", "My boss is moving to the London office.",
     "Where is my manager transferring?"),
    ("family", "My daughter plays goalkeeper for her club.",
     "What position does my girl have on the pitch?"),
    ("habits", "I'm growing out my beard for charity.", "Why am I not shaving?"),
    ("places", "My favourite holiday destination is Crete.",
     "Which Greek island do I keep returning to?"),
    ("habits", "I got my black belt in karate.", "What martial arts rank did I reach?"),
    ("health", "My mom is recovering from a stroke.",
     "What happened to my mother's health?"),
    ("places", "We bought a cottage in Cornwall.", "Where is our vacation house?"),
    ("habits", "I play the ukulele at open mic nights.", "What do I perform on stage?"),
    ("family", "My son wants to be an astronaut.", "What's my boy's dream career?"),
    ("places", "I lived in Nairobi for three years.", "Which African capital was my home?"),
    ("family", "I'm a Leo, born in August.", "What's my star sign?"),
    ("decisions", "We got our kitchen redone with marble counters.",
     "What stone did we pick for the worktops?"),
    ("health", "I've been sleeping badly because of the neighbours' parties.",
     "What's keeping me up?"),
    ("habits", "My favourite ice cream flavour is pistachio.",
     "Which frozen dessert taste do I prefer?"),
    ("decisions", "I passed my motorcycle test on the second try.",
     "How many attempts did it take to get my bike licence?"),
    ("family", "My grandparents ran a bakery in Naples.",
     "What shop did my mother's parents own in Italy?"),
    ("work", "I'm the treasurer of the parent-teacher association.",
     "What role do I have on the school committee?"),
    ("family", "My partner snores like a chainsaw.",
     "Why can't I get rest next to my spouse?"),
    ("places", "I hiked the Inca Trail in May.", "Which famous Peruvian trek did I do?"),
]

# (domain, cue, a later message that refers back to it without its words, and what a model
# asked "what did the earlier message most likely say?" could answer from the later message
# alone: hermes.agent.recall_rewrite, scripted in bench_locomo --rewrite). The answers were
# written for the later message; they guess the subject the later message hints at, and are
# what the scripted model replies, so the figures are those of a model that guesses this well.
REFERS_BACK: list[tuple[str, str, str, str]] = [
    ("family", "My sister got engaged on a hike in the mountains.",
     "Remember the big news about my sibling I told you? The date is set for June.",
     "My sister got engaged and is planning her wedding."),
    ("health", "I've been diagnosed with diabetes, type two.",
     "As I said, the health thing is under control now, my numbers look much better.",
     "I was diagnosed with a condition, maybe diabetes or high blood pressure."),
    ("work", "I got laid off on Friday.",
     "The thing I told you about with my job? I start somewhere new on Monday.",
     "I lost my job, I was laid off or fired."),
    ("places", "We moved to a tiny village in the hills.",
     "Like I mentioned, life out here is slow, the shop shuts at four.",
     "We moved out of the city to a small village in the countryside."),
    ("habits", "I quit coffee two weeks ago, the jitters were ruining my afternoons.",
     "Remember what I gave up? Day twenty and no headaches anymore.",
     "I gave up coffee or caffeine, or stopped drinking or smoking."),
    ("family", "We adopted a rescue greyhound last weekend.",
     "The new family member I told you about chewed through a shoe today.",
     "We got a new dog or puppy, we adopted a pet."),
    ("decisions", "I turned down the offer from the startup, too risky.",
     "As I said before, saying no was right, they just let half their people go.",
     "I turned down a job offer from a company."),
    ("health", "I twisted my knee skiing, so no stairs for a while.",
     "The injury I mentioned earlier is healing, physio says another month.",
     "I hurt my knee or my ankle, an injury from sport."),
    ("family", "My mom moved in with us after her surgery.",
     "Remember how I said we have a houseguest now? She's rearranged every cupboard.",
     "My mother or mother-in-law moved in with us."),
    ("work", "I got promoted to team lead.",
     "The change at work I told you about comes with a bigger desk, at least.",
     "I got promoted at work, a new role as manager or lead."),
    ("places", "I'm spending the winter in Thailand.",
     "Like I said, it's warm here, I haven't worn socks in weeks.",
     "I'm spending the winter somewhere warm abroad, in Asia."),
    ("habits", "I started learning Japanese for our trip.",
     "Remember the language I told you I'm studying? I read my first menu today.",
     "I started learning Japanese or another language."),
    ("health", "I'm lactose intolerant, so dairy is out.",
     "As I mentioned, I can't have the cheesy stuff, so I ordered the salad.",
     "I am lactose intolerant and can't eat dairy."),
    ("family", "We're expecting twins in the fall!",
     "The double surprise I told you about: both are kicking now.",
     "We are expecting twins, a pregnancy."),
    ("decisions", "We decided to homeschool the kids this year.",
     "The plan we talked about for my children's education is going better than expected.",
     "We decided to homeschool our children or change their school."),
    ("work", "I quit my job at the bank to start a bakery.",
     "Remember what I told you about my big career leap? We sold out of everything by noon.",
     "I quit my job to start my own business, a shop or a bakery."),
    ("places", "Our building's elevator has been broken for weeks.",
     "The annoying thing I told you about at our block of flats is still not fixed.",
     "The elevator or the heating in our building is broken."),
    ("habits", "I sold my car last month and now bike everywhere.",
     "Like I said, no more wheels for me except the two-wheeled kind.",
     "I sold my car and ride a bicycle everywhere now."),
    ("health", "Needles terrify me, I nearly faint at the clinic.",
     "You know the fear I told you about? I got through my blood test without passing out.",
     "I am scared of needles and injections."),
    ("family", "My brother and I haven't spoken since the argument at Dad's funeral.",
     "The falling-out I mentioned last time: we finally had coffee together.",
     "I fell out with my brother or sister after an argument."),
    ("work", "I'm on parental leave until September.",
     "As I said, I'm off until the autumn, so no meetings for me.",
     "I'm on parental leave or a break from work."),
    ("decisions", "We picked the blue tiles for the bathroom.",
     "Remember the renovation choice I told you about? It looks great installed.",
     "We chose tiles or colours for the bathroom or kitchen renovation."),
    ("places", "We rented a cabin by the lake for the summer.",
     "The holiday place I told you about has a family of ducks now.",
     "We rented a cabin or a house by a lake for the summer."),
    ("habits", "I've been doing yoga every morning at six.",
     "Like I mentioned, the early routine is paying off, my back feels great.",
     "I do yoga or exercise every morning early."),
    ("health", "The dentist says I grind my teeth at night.",
     "The thing I told you my tooth doctor found? The guard really helps.",
     "The dentist said I grind my teeth."),
    ("family", "My daughter just started kindergarten.",
     "Remember the big milestone for my little one? She made her first friend.",
     "My daughter or son started school or kindergarten."),
    ("work", "Our startup just ran out of funding.",
     "The bad news I mentioned about the company got worse, we close Friday.",
     "Our company or startup is in trouble, out of money."),
    ("places", "I just moved to Seattle.",
     "As I said, the new city suits me, even with all the grey skies.",
     "I moved to a new city, maybe Seattle or London."),
    ("habits", "I've been volunteering at the animal shelter on Saturdays.",
     "The weekend thing I told you about: I'm taking a cat home.",
     "I volunteer at an animal shelter on weekends."),
    ("decisions", "I signed up for a marathon in October.",
     "Remember the race I told you I entered? Only eight weeks of training left.",
     "I signed up for a marathon or a race."),
]

# (kind, domain, cue, later message), as IMPLICIT, written to be far in meaning as well as in
# words: the later message tells a consequence of the cue in the vocabulary of another scene
# (a sabbatical to write a novel / "Chapter nine is fighting me, the detective refuses to
# confess"), as a person refers to what they told weeks before. Meaning alone finds far fewer
# of these than of IMPLICIT (bench_locomo --probes hard --retriever dense); none of their
# cues or topics repeats one of IMPLICIT's.
HARD: list[tuple[str, str, str, str]] = [
    ("state", "family", "My son moved to Australia for university in September.",
     "I set an alarm for three in the morning so we can talk before his day starts."),
    ("causal", "health", "The dermatologist found a suspicious mole, so I'm covering up outdoors.",
     "Wore long sleeves and a wide hat to the beach and everyone thought I was cold."),
    ("preference", "habits", "I can't stand the sound of people chewing.",
     "Eating lunch at my desk with headphones on again, as usual."),
    ("state", "work", "I started driving for a delivery company.",
     "My back seat is full of parcels and my lunch gets eaten at red lights."),
    ("state", "family", "We got a puppy two weeks ago.",
     "Three of my slippers have tiny teeth marks in them now."),
    ("causal", "health", "I had my wisdom teeth out on Monday.",
     "Living on smoothies and mashed potatoes all week."),
    ("state", "decisions", "We've decided to downsize now the kids have left home.",
     "Had to choose which of the four armchairs survives the move."),
    ("state", "work", "I went freelance after the agency closed.",
     "Chasing three clients for unpaid invoices this week."),
    ("causal", "places", "The bridge into town is closed for repairs until summer.",
     "My commute is forty minutes longer with the detour through the valley."),
    ("state", "habits", "I'm training for my first triathlon.",
     "Bought a wetsuit and I look like a seal in it."),
    ("preference", "family", "My husband can't cook at all, so I make every meal.",
     "He burned the toast again while I was away for one night."),
    ("state", "family", "My father's eyesight is too poor for him to drive anymore.",
     "I'm his taxi to the bowling club every Wednesday now."),
    ("causal", "habits", "Sitting all day wrecked my lower back, so I got a kneeling chair.",
     "My shins ache by four in the afternoon now."),
    ("state", "places", "Our new place is at the top of a very steep hill.",
     "I arrive at my own front door panting like I've run a marathon."),
    ("state", "decisions", "I finally cancelled the gym membership.",
     "Doing push-ups in the living room with a video on my laptop."),
    ("causal", "health", "I've had tinnitus since the concert, a constant ringing.",
     "I fall asleep with a fan running for the hum."),
    ("state", "family", "My twins started walking last week.",
     "Every cupboard in the kitchen has a latch on it now."),
    ("preference", "habits", "I can't sleep unless the room is completely dark.",
     "Taped cardboard over the hotel window last night."),
    ("causal", "places", "There's a wasp nest under our roof, so the garden is off limits.",
     "The kids had their birthday party indoors even though it was sunny."),
    ("state", "decisions", "We've decided the children only get screens on weekends.",
     "The kids have read every library book about dinosaurs this month."),
    ("causal", "family", "My grandmother only speaks Portuguese.",
     "I've been practising verb conjugations before every visit to her flat."),
    ("preference", "work", "I never schedule anything on Friday afternoons, that's my admin time.",
     "Turned down a client lunch at three on the last day of the week."),
    ("state", "health", "I'm on antibiotics for ten days, so no alcohol.",
     "Toasted the bride with apple juice."),
    ("state", "places", "Our boiler broke and the landlord won't fix it until January.",
     "Wearing two jumpers and a hat inside the flat."),
    ("state", "habits", "I've started brewing my own beer in the garage.",
     "There's a sweet smell of yeast everywhere and bottles clinking on every shelf."),
    ("state", "family", "My brother is doing a year of research in Antarctica.",
     "His messages arrive once a week and mention penguins a lot."),
    ("state", "work", "I've been elected to the town council.",
     "Three residents cornered me at the bakery about potholes."),
    ("preference", "health", "I'm scared of heights, even a stepladder is too much.",
     "Paid a teenager to clean out the gutters for me."),
    ("state", "decisions", "I switched to a four-day week to look after Mum.",
     "Fridays are for hospital appointments and her groceries."),
    ("state", "places", "We live right next to the railway line.",
     "Visitors jump every time the freight rumbles past at night."),
    ("state", "health", "I've got a stomach ulcer, so spicy food is banned.",
     "Watched everyone devour the curry while I had plain rice."),
    ("state", "family", "My parents are separating after thirty years.",
     "This Christmas means two dinners in two different towns."),
    ("state", "work", "I've been put on a performance improvement plan.",
     "My manager now wants a written summary of every task I finish."),
    ("state", "places", "We inherited my uncle's allotment.",
     "My fingernails are permanently black and we have forty courgettes."),
    ("causal", "health", "My knees are shot from years of football, so I swim instead.",
     "The chlorine has turned my hair slightly green."),
    ("state", "habits", "I've taken up birdwatching since I retired.",
     "Got up before dawn to sit in a freezing hide by the marsh."),
    ("state", "family", "My teenage son shot up eight inches this year.",
     "Bought him new trainers for the third time since January."),
    ("state", "work", "I'm now teaching at the primary school in the village.",
     "Thirty little faces ask me why the sky is blue every single day."),
    ("causal", "decisions", "We sold our second car to save money.",
     "My wife and I now argue over who gets to drive on Saturdays."),
    ("causal", "places", "The bus route past our house was cut in the spring.",
     "I pay a fortune in taxis to get to choir practice."),
    ("causal", "family", "My in-laws are staying with us for the whole summer.",
     "I've started taking very long walks after dinner, alone."),
    ("state", "work", "I'm on a three-month sabbatical to write a novel.",
     "Chapter nine is fighting me, the detective refuses to confess."),
    ("state", "health", "I'm six weeks into physical therapy for my shoulder.",
     "Still can't reach the top cupboard without wincing."),
    ("state", "habits", "We've started keeping hens.",
     "Breakfast is never a problem, but the fox visits every night."),
    ("state", "decisions", "I said yes to coaching my son's football team.",
     "My Saturdays now involve oranges cut into quarters and a lot of shouting."),
    ("state", "family", "My sister just had her first baby.",
     "I'm officially an aunt and already bought far too many tiny socks."),
    ("preference", "work", "I only take meetings in the morning, afternoons are for deep work.",
     "Declined four invites after lunch today and nobody complained."),
    ("state", "health", "I had laser eye surgery last week.",
     "Threw away every pair of contacts in the bathroom drawer."),
    ("state", "places", "We're living in a camper van while the house is being built.",
     "Showering at the swimming pool every morning is getting old."),
    ("state", "decisions", "I've decided to go back to university at forty-two.",
     "My classmates think I'm the lecturer when I walk in."),
    ("state", "habits", "I've started keeping bees in the back garden.",
     "Got stung twice on the neck on Sunday, but the jars on the shelf were worth it."),
    ("causal", "health", "I'm anaemic, the doctor put me on iron pills.",
     "Spinach with everything and I still nap in my car at lunch."),
    ("causal", "places", "The nearest supermarket closed, it's a twenty-minute drive for milk now.",
     "I freeze bread and stock up like we're expecting a siege."),
    ("state", "work", "I lost my voice last week and I teach nine-year-olds.",
     "Spent the whole lesson writing instructions on the whiteboard."),
    ("state", "family", "My dad retired in June.",
     "He's reorganised our garage three times and has started on the shed."),
    ("causal", "decisions", "We cancelled our trip to Spain because money is tight.",
     "Spent the week we'd booked painting the fence instead."),
    ("state", "health", "I've had a metal plate in my ankle since the accident.",
     "The airport scanner beeped again and I got the full pat-down."),
    ("state", "places", "Our cottage has no mobile signal at all.",
     "I have to stand on the garden wall to send a text."),
    ("causal", "family", "My son is autistic and loud places overwhelm him.",
     "We ate cake in the car park instead of the party hall."),
    ("state", "work", "I became a union rep at the factory.",
     "Spent my lunch break listening to complaints about the rota."),
    ("state", "habits", "I've been trying to drink two litres of water a day.",
     "I know the location of every public toilet in the city now."),
    ("state", "decisions", "We've said yes to hosting an exchange student from Brazil.",
     "The spare room now has football posters and very loud music."),
    ("preference", "places", "I get seasick even on a lake.",
     "Watched the whale tour leave the dock from a café."),
    ("state", "health", "I've lost my sense of smell since the virus.",
     "I didn't notice the gas was left on until my flatmate came home."),
    ("state", "family", "Our eldest left for the army last month.",
     "Still setting the table for four, out of habit."),
    ("causal", "work", "My manager quit, so I'm covering her job too.",
     "I'm answering emails at eleven at night and the coffee machine knows my name."),
    ("preference", "habits", "I knit while I watch television, it calms me.",
     "Every relative is getting a scarf for their birthday this year."),
    ("state", "places", "Our street is being dug up for new pipes.",
     "Had to park three roads away and carry the groceries in the rain."),
    ("causal", "health", "I've been getting terrible heartburn at night.",
     "Sleeping propped up on three pillows like a queen."),
    ("state", "decisions", "I turned down the transfer to head office.",
     "Still at my old desk by the printer, and happy about it."),
    ("preference", "family", "My wife hates surprises of any kind.",
     "I told her about the birthday party two months in advance, with a spreadsheet."),
    ("state", "work", "I got hired as a lifeguard for the summer.",
     "My shoulders are peeling and I can't stop twirling a whistle."),
]

# What the other person answers: short, generic, as chats go (each checked against the later
# message like the cue; the first that shares no word is used, rotating through the list).
REPLIES = [
    "Oh wow, how are you finding it?", "That makes total sense.", "Good for you!",
    "Oh no, I'm sorry to hear that.", "Keep me posted!", "Ha, I can picture that.",
    "Really? Tell me more sometime.", "That's a big change.", "Huh, I never knew that.",
    "Fair enough, honestly.", "Wow, that's news!", "Hang in there.",
    "I love that for you.", "Interesting, why?", "Noted!", "Sounds like a plan.",
    "That must be tough.", "Nice one!", "I'd have done the same.", "Whoa.",
    "Let me know if I can help.", "Totally understandable.", "Congrats!!",
    "I had a feeling.", "Oh interesting.", "Brave move.", "Makes sense to me.",
    "Good call.", "That's wild.", "Aw, okay.",
]


def probes(which: str) -> list[Probe]:
    """The probes of one set ("implicit" or "paraphrase"), in order."""
    if which == "implicit":
        return [Probe("implicit", kind, domain, cue, later)
                for kind, domain, cue, later in IMPLICIT]
    if which == "paraphrase":
        return [Probe("paraphrase", "paraphrase", domain, cue, question)
                for domain, cue, question in PARAPHRASE]
    if which == "hard":
        return [Probe("hard", kind, domain, cue, later) for kind, domain, cue, later in HARD]
    if which == "refers-back":
        return [Probe("refers-back", "refers back", domain, cue, later)
                for domain, cue, later, _ in REFERS_BACK]
    raise ValueError(f"no probe set {which!r} (implicit, hard, paraphrase, refers-back)")


def scripted_rewrites() -> dict[str, str]:
    """The scripted model's answer to "what did the earlier message say?" for each later
    message of the refers-back set (bench_locomo --rewrite)."""
    return {later: answer for _, _, later, answer in REFERS_BACK}


def _tokenize_check_db() -> sqlite3.Connection:
    sys.path.insert(0, str(ROOT))
    from hermes.store.migrations import TOKENIZE

    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZE}')")
    return conn


def shared_words(later: str, *texts: str, conn: sqlite3.Connection | None = None) -> list[str]:
    """The content words of ``later`` (Hermes's query plan, stopwords out) that match any of
    ``texts`` under Hermes's tokenizer (Porter stems, diacritics folded)."""
    sys.path.insert(0, str(ROOT))
    from hermes.store.fts import STOPWORDS, build_match

    conn = conn or _tokenize_check_db()
    conn.execute("DELETE FROM t")
    conn.executemany("INSERT INTO t VALUES (?)", [(t,) for t in texts])
    shared = []
    for term in build_match(later).terms:
        # a stopword, or one written as a contraction ("I'm" is the phrase "i m" to FTS5)
        if term.is_stopword or "'".join(term.tokens).casefold() in STOPWORDS:
            continue
        if conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", [term.fts]).fetchone()[0]:
            shared.append(" ".join(term.tokens))
    return shared


def reply_for(index: int, later: str, cue: str, conn: sqlite3.Connection) -> str:
    """The first of REPLIES from ``index`` on sharing no content word with ``later``."""
    for step in range(len(REPLIES)):
        reply = REPLIES[(index + step) % len(REPLIES)]
        if not shared_words(later, reply, conn=conn):
            return reply
    raise ValueError(f"no reply shares no word with {later!r}")


def insert(convs: list[data.Conversation], which: str, *,
           facts: bool = False) -> list[data.Conversation]:
    """``convs`` with the probes of set ``which`` inserted as two-turn sessions, and the probes'
    later messages as their only questions (category by kind: :data:`CATEGORIES`). The
    sessions keep chronological order (a home stores them as they happen). ``facts``: each cue
    is also an observation (a fact learned from its turn, in its words), as the extractor
    would have learned something from it."""
    conn = _tokenize_check_db()
    chosen = probes(which)
    rng = random.Random(f"{SEED}:{which}")
    out = []
    for c_index, conv in enumerate(convs):
        mine = [(i, p) for i, p in enumerate(chosen) if i % len(convs) == c_index]
        first, last = conv.sessions[0].started_at, conv.sessions[-1].started_at
        latest = last - timedelta(days=21)
        span = max((latest - first).total_seconds(), 3600.0)
        sessions = list(conv.sessions)
        questions = []
        observations = list(conv.observations)
        for n, (i, probe) in enumerate(mine):
            number = FIRST_SESSION + n
            teller, other = conv.speakers if i % 2 == 0 else conv.speakers[::-1]
            when = first + timedelta(seconds=rng.uniform(0, span))
            when = when.replace(hour=rng.randint(9, 20), minute=rng.choice((0, 15, 30, 45)),
                                second=0, microsecond=0)
            reply = reply_for(i, probe.later, probe.cue, conn)
            sessions.append(data.LocomoSession(number, when, [
                data.Turn(f"D{number}:1", teller, probe.cue),
                data.Turn(f"D{number}:2", other, reply),
            ]))
            category = KIND.get(probe.kind, 31 if probe.set == "refers-back" else 21)
            questions.append(data.Question(probe.later, probe.cue, category, [f"D{number}:1"]))
            if facts:
                observations.append(data.Observation(teller, probe.cue, number,
                                                     [f"D{number}:1"]))
        sessions.sort(key=lambda s: s.started_at)
        out.append(dataclasses.replace(conv, sessions=sessions, questions=questions,
                                       observations=observations))
    return out


def check() -> list[str]:
    """Every probe whose later message shares a content word with its exchange (cue and
    reply), or that is a duplicate; [] when the sets are clean."""
    conn = _tokenize_check_db()
    problems = []
    for which in ("implicit", "hard", "paraphrase", "refers-back"):
        seen: set[str] = set()
        for i, probe in enumerate(probes(which)):
            shared = shared_words(probe.later, probe.cue, conn=conn)
            if shared:
                problems.append(f"{which} #{i}: {shared} in {probe.cue!r} / {probe.later!r}")
            if probe.later in seen or probe.cue in seen:
                problems.append(f"{which} #{i}: a duplicate")
            seen.update((probe.later, probe.cue))
            reply_for(i, probe.later, probe.cue, conn)
    return problems


if __name__ == "__main__":
    found = check()
    for line in found:
        print(line)
    print(f"implicit {len(IMPLICIT)}, hard {len(HARD)}, paraphrase {len(PARAPHRASE)}, "
          f"refers back {len(REFERS_BACK)}: "
          f"{len(found)} problem(s)", file=sys.stderr)
    raise SystemExit(1 if found else 0)
