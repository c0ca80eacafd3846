"""The scripted conversation for scripts/bench_extraction.py: 200+ user turns with ground truth.

Each turn has a kind (small_talk, question, statement, paraphrase, correction, remember, mixed)
and, where the extraction model should act, what a competent model would return. Corrections
either name the old fact by its number ("update", the model noticed) or just state the new
value ("create", the model did not): consolidation must supersede the old fact in both cases.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Turn:
    kind: str
    text: str
    key: str | None = None            # the true fact this turn is about
    content: str | None = None        # the fact's (new) content, as the model would write it
    entities: list[str] = field(default_factory=list)
    mode: str = "create"              # create | update | delete (what the scripted model returns)
    reason: str | None = None


# key, what the user says, the fact, entities
STATEMENTS = [
    ("job", "I work at Initech as a backend engineer.",
     "The user works at Initech as a backend engineer.", ["Initech"]),
    ("city", "I live in Porto, not far from the river.", "The user lives in Porto.", ["Porto"]),
    ("sister", "My sister Ana is a nurse at the children's hospital.",
     "Ana is the user's sister and works as a nurse.", ["Ana"]),
    ("dog", "We have a dog called Rex, a border collie.",
     "The user has a border collie called Rex.", ["Rex"]),
    ("allergy", "I'm allergic to penicillin.", "The user is allergic to penicillin.",
     ["penicillin"]),
    ("editor", "I use Neovim for basically everything.", "The user's editor is Neovim.",
     ["Neovim"]),
    ("japanese", "I've been learning Japanese for two years now.",
     "The user has been learning Japanese since 2024.", ["Japanese"]),
    ("diet", "I don't eat meat, I'm vegetarian.", "The user is vegetarian.", []),
    ("manager", "My manager is Tom Berg.", "The user's manager is Tom Berg.", ["Tom Berg"]),
    ("partner", "My partner Sam is a graphic designer.",
     "Sam is the user's partner and a graphic designer.", ["Sam"]),
    ("running", "I run about 30 km a week.", "The user runs about 30 km a week.", []),
    ("car", "I drive a 2015 VW Golf.", "The user's car is a 2015 VW Golf.", ["VW Golf"]),
    ("coffee", "I drink my coffee black, no sugar.",
     "The user drinks coffee black without sugar.", []),
    ("birthday", "My birthday is on 14 May.", "The user's birthday is 14 May.", []),
    ("laptop", "My laptop is a ThinkPad X1 Carbon.", "The user's laptop is a ThinkPad X1 Carbon.",
     ["ThinkPad X1 Carbon"]),
    ("homeauto", "I'm building a home automation setup with Home Assistant.",
     "The user is building a home automation setup with Home Assistant.", ["Home Assistant"]),
    ("server", "Our home server runs Debian 12.", "The user's home server runs Debian 12.",
     ["Debian"]),
    ("daughter", "My daughter Maya started first grade this year.",
     "Maya is the user's daughter and started first grade in 2026.", ["Maya"]),
    ("band", "I play bass in a band called The Loud Quiet.",
     "The user plays bass in the band The Loud Quiet.", ["The Loud Quiet"]),
    ("climbing", "I go bouldering on Tuesdays and Thursdays.",
     "The user goes bouldering on Tuesdays and Thursdays.", []),
    ("tracker", "Our team uses Jira for tickets.", "The user's team uses Jira for tickets.",
     ["Jira"]),
    ("mother", "My mother lives in Lyon.", "The user's mother lives in Lyon.", ["Lyon"]),
    ("answers", "I prefer short answers with bullet points.",
     "The user prefers short answers with bullet points.", []),
    ("evening", "In the evening I only drink rooibos tea.",
     "The user only drinks rooibos tea in the evening.", ["rooibos"]),
    ("marathon", "I signed up for the Berlin marathon in September 2027.",
     "The user is registered for the Berlin marathon in September 2027.", ["Berlin marathon"]),
    ("phone", "My phone is a Pixel 8.", "The user's phone is a Pixel 8.", ["Pixel 8"]),
    ("shell", "My shell is fish, I love the autosuggestions.", "The user's shell is fish.",
     ["fish"]),
    ("dentist", "My dentist is Dr. Okafor on Elm Street.",
     "The user's dentist is Dr. Okafor on Elm Street.", ["Dr. Okafor"]),
    ("kitchen", "We're renovating the kitchen this winter.",
     "The user is renovating the kitchen in winter 2026-2027.", []),
    ("friend", "My best friend Joana lives in Madrid.",
     "Joana is the user's best friend and lives in Madrid.", ["Joana", "Madrid"]),
    ("languages", "I speak Portuguese, English and some French.",
     "The user speaks Portuguese, English and some French.", []),
    ("cilantro", "I can't stand cilantro.", "The user dislikes cilantro.", ["cilantro"]),
    ("workstart", "I usually start work at 8:30.", "The user usually starts work at 8:30.", []),
    ("router", "Our wifi router is in the attic.", "The user's wifi router is in the attic.", []),
    ("oncall", "I'm on call every fourth week.", "The user is on call every fourth week.", []),
    ("favband", "My favourite band is Radiohead.", "The user's favourite band is Radiohead.",
     ["Radiohead"]),
    ("dotfiles", "I keep my dotfiles in a git repo on GitHub.",
     "The user keeps their dotfiles in a git repository on GitHub.", ["GitHub"]),
    ("japantrip", "I'm saving up for a trip to Japan next spring.",
     "The user is saving up for a trip to Japan in spring 2027.", ["Japan"]),
    ("piano", "Maya has piano lessons on Saturday mornings.",
     "Maya has piano lessons on Saturday mornings.", ["Maya"]),
    ("bike", "I commute by bike when it doesn't rain.",
     "The user commutes by bike when it does not rain.", []),
]

# key, what the user says, the model's (paraphrased) create, entities
PARAPHRASES = [
    ("job", "Did I mention I'm at Initech? Backend stuff mostly.",
     "The user is a backend engineer at Initech.", ["Initech"]),
    ("allergy", "Like I said before, I'm allergic to penicillin, so careful with suggestions.",
     "The user is allergic to penicillin.", ["penicillin"]),
    ("dog", "Rex, our border collie, destroyed another toy today.",
     "The user has a border collie named Rex.", ["Rex"]),
    ("partner", "Sam, my partner, just finished a big graphic design project.",
     "Sam is the user's partner and works as a graphic designer.", ["Sam"]),
    ("japanese", "My Japanese is slowly getting better, two years in.",
     "The user has been learning Japanese since 2024.", ["Japanese"]),
    ("mother", "I'm calling my mother in Lyon tonight.", "The user's mother lives in Lyon.",
     ["Lyon"]),
    ("climbing", "Bouldering again on Tuesday, as every week.",
     "The user goes bouldering every Tuesday and Thursday.", []),
    ("friend", "Joana from Madrid, my best friend, is visiting.",
     "Joana is the user's best friend and lives in Madrid.", ["Joana", "Madrid"]),
    ("homeauto", "Spent the evening on my Home Assistant automations again.",
     "The user is building a home automation setup with Home Assistant.", ["Home Assistant"]),
    ("server", "The home server with Debian 12 needs a reboot.",
     "The user's home server runs Debian 12.", ["Debian"]),
]

# key, what the user says, the new content, entities, mode (update | create | delete), reason
CORRECTIONS = [
    ("job", "I left Initech, I'm at Acme Corp now, still backend.",
     "The user works at Acme Corp as a backend engineer.", ["Acme Corp"], "update", None),
    ("city", "We moved to Berlin last month.", "The user lives in Berlin since October 2026.",
     ["Berlin"], "create", None),
    ("manager", "Tom left the company, my new manager is Priya Shah.",
     "The user's manager is Priya Shah.", ["Priya Shah"], "update", None),
    ("editor", "I switched from Neovim to Helix, much less config.",
     "The user's editor is Helix.", ["Helix"], "update", None),
    ("car", "I sold the Golf, I drive a Tesla Model 3 now.", "The user's car is a Tesla Model 3.",
     ["Tesla Model 3"], "update", None),
    ("laptop", "I replaced the ThinkPad with a MacBook Air.", "The user's laptop is a MacBook Air.",
     ["MacBook Air"], "create", None),
    ("diet", "I'm fully vegan now, not just vegetarian.", "The user is vegan.", [], "update", None),
    ("coffee", "I've started taking oat milk in my coffee.",
     "The user drinks coffee with oat milk.", [], "update", None),
    ("shell", "My shell is zsh now, fish broke too many scripts.", "The user's shell is zsh.",
     ["zsh"], "create", None),
    ("phone", "My phone is an iPhone 15 now.", "The user's phone is an iPhone 15.",
     ["iPhone 15"], "create", None),
    ("favband", "These days my favourite band is Khruangbin.",
     "The user's favourite band is Khruangbin.", ["Khruangbin"], "create", None),
    ("running", "I'm down to 15 km a week because of a knee injury.",
     "The user runs about 15 km a week because of a knee injury.", [], "update", None),
    ("mother", "My mother moved from Lyon to Bordeaux.", "The user's mother lives in Bordeaux.",
     ["Bordeaux"], "update", None),
    ("dentist", "I switched dentists, now I go to Dr. Meyer.", "The user's dentist is Dr. Meyer.",
     ["Dr. Meyer"], "update", None),
    ("tracker", "Our team moved off Jira to Linear.", "The user's team uses Linear for tickets.",
     ["Linear"], "update", None),
    ("band", "I no longer play in The Loud Quiet, the band split up.", None, [], "delete",
     "The band The Loud Quiet split up."),
]

REMEMBER = [
    "Remember that my passport expires in March 2027.",
    "/remember the spare key is with our neighbour Lúcia",
    "Don't forget that I'm on holiday from 20 to 27 December.",
    "Note that Maya's school starts at 8:15.",
    "Please remember that Sam's birthday is on 3 July.",
    "Keep in mind that I can't do meetings before 10am.",
    "Remember: our wifi guest network is called Attic-Guest.",
    "Make a note that the boiler service is due in February.",
    "Remember that I prefer window seats on flights.",
    "Don't forget that Rex is on a grain-free diet.",
    "Note that my gym membership renews on the 1st of each month.",
    "Remember that Joana's kids are called Tiago and Rita.",
    "Please note that I take the 7:42 train on Mondays.",
    "Remember that I'm the treasurer of the climbing club.",
    "/remember my library card number starts with 4410",
]

# what the user says, the model's create, entities (a statement after small talk)
MIXED = [
    ("thanks! btw I just booked flights to Tokyo for April.",
     "The user booked flights to Tokyo for April 2027.", ["Tokyo"]),
    ("haha nice. Also, my brother Luís is getting married in June.",
     "Luís is the user's brother and is getting married in June 2027.", ["Luís"]),
    ("ok cool. We got Rex a new vet, Dr. Lindqvist.",
     "Rex's vet is Dr. Lindqvist.", ["Rex", "Dr. Lindqvist"]),
    ("great, thanks. I'm hosting the book club next Friday.",
     "The user is hosting the book club on 2026-12-04.", ["book club"]),
    ("good morning! I finally finished the kitchen tiling yesterday.",
     "The user finished tiling the kitchen on 2026-11-28.", []),
    ("cheers. Sam and I are thinking about getting a second dog.",
     "The user and Sam are considering getting a second dog.", ["Sam"]),
    ("lol. My Home Assistant instance runs on a Raspberry Pi 5.",
     "The user's Home Assistant instance runs on a Raspberry Pi 5.",
     ["Home Assistant", "Raspberry Pi 5"]),
    ("thank you! Our office moved to the Marvila district.",
     "The user's office is in the Marvila district.", ["Marvila"]),
    ("nice one. I've started volunteering at the food bank on Sundays.",
     "The user volunteers at the food bank on Sundays.", ["food bank"]),
    ("sounds good. My sister Ana is expecting a baby in May.",
     "Ana, the user's sister, is expecting a baby in May 2027.", ["Ana"]),
    ("got it. I'm learning to make sourdough bread.",
     "The user is learning to make sourdough bread.", ["sourdough"]),
    ("perfect. Maya wants to be an astronaut, for the record.",
     "Maya wants to be an astronaut.", ["Maya"]),
    ("hey! I got promoted to senior engineer today.",
     "The user was promoted to senior engineer on 2026-11-29.", []),
    ("thanks. We're spending Christmas at my mother's.",
     "The user is spending Christmas 2026 at their mother's home.", []),
    ("ok. I'm trying to read one book a month this year.",
     "The user aims to read one book a month in 2026.", []),
]

SMALL_TALK = [
    "hi", "Hello!", "hey hermes", "good morning", "good night", "thanks!", "thank you so much",
    "ok", "okay cool", "👍", "lol", "haha nice", "got it, thanks", "makes sense", "sounds good",
    "perfect, thank you!", "no worries", "how are you?", "what's up", "I'm good thanks, you?",
    "see you later", "bye!", "have a great weekend", "nvm", "that's awesome", "great job",
    "yes", "nope", "hmm", "cool cool",
]

QUESTIONS = [
    "What's the capital of Peru?", "How many ounces are in a pound?", "Can you tell me a joke?",
    "Write a haiku about autumn rain.", "Explain monads simply.",
    "Translate 'good luck' into Japanese", "What time is it in Tokyo right now?",
    "Give me three ideas for a team name", "Why is the sky blue?",
    "Can you help me with a regex for emails?", "is there a faster way to do that?",
    "Summarize the plot of Dune in two sentences.", "What's a good stretch for lower back pain?",
    "How do I undo the last git commit?", "What's the difference between TCP and UDP?",
    "Suggest a name for a grey cat.", "How long should I boil an egg?",
    "What does HTTP 418 mean?", "Convert 30 km to miles.", "Explain RAID 5 briefly.",
    "What's a good recipe with chickpeas?", "How does compound interest work?",
    "List five classic sci-fi novels.", "What is the boiling point of water at altitude?",
    "Can you draft a polite reminder email?", "Which is faster, Rust or Go?",
    "What's the weather usually like in Kyoto in April?", "How do I center a div?",
    "Recommend a podcast about history.", "What year did the Berlin Wall fall?",
    "How do I make cold brew?", "Write a limerick about a dog.",
    "What's the population of Lisbon?", "Explain what a Bloom filter is.",
    "How many time zones does Russia have?", "Give me a synonym for 'happy'.",
    "What's 17% of 230?", "How do I sort a dict by value in Python?",
    "Tell me a fun fact about octopuses.", "What's the best way to learn kanji?",
    "Check this sentence for grammar: 'Me and him goes to the store.'",
    "What should I cook tonight?", "Can you summarize our last chat?",
    "How do I rotate a PDF page?", "What's a good warm-up before running?",
]


def build(seed: int = 7) -> list[Turn]:
    """The conversation, in order: fillers shuffled around the statements, each paraphrase and
    correction placed somewhere after the statement it refers to."""
    rng = random.Random(seed)
    turns: list[Turn] = [Turn("statement", t, k, c, list(e)) for k, t, c, e in STATEMENTS]
    fillers: list[Turn] = (
        [Turn("small_talk", t) for t in SMALL_TALK * 2]
        + [Turn("question", t) for t in QUESTIONS]
        + [Turn("remember", t, key=f"remember:{i}") for i, t in enumerate(REMEMBER)]
        + [Turn("mixed", t, f"mixed:{i}", c, list(e)) for i, (t, c, e) in enumerate(MIXED)]
    )
    rng.shuffle(fillers)
    # statements spread over the first 60% of the conversation
    ordered: list[Turn] = []
    statements = list(turns)
    for filler in fillers:
        ordered.append(filler)
        if statements and rng.random() < 0.55:
            ordered.append(statements.pop(0))
    ordered.extend(statements)
    for key, text, content, entities in PARAPHRASES:
        after = next(i for i, t in enumerate(ordered) if t.key == key)
        ordered.insert(rng.randint(after + 1, len(ordered)), Turn("paraphrase", text, key, content,
                                                                  list(entities)))
    for key, text, content, entities, mode, reason in CORRECTIONS:
        after = max(i for i, t in enumerate(ordered) if t.key == key)
        ordered.insert(rng.randint(after + 1, len(ordered)),
                       Turn("correction", text, key, content, list(entities), mode, reason))
    return ordered
