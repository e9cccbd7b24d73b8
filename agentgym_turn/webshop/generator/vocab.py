"""Vocabularies of the generated WebShop catalog, and WebShop's own normalisation lists.

The catalog generator (:mod:`.catalog`) draws every product from these lists with numpy, so the
lists *are* the language of the generated shop. They mirror WebShop's five top-level
categories (fashion, makeup, electronics, furniture, food: Yao et al., 2022, section 3) and its
data shapes: a search ``query`` per product type, an Amazon-style ``product_category`` path
joined by ``" › "``, short lower-case attribute phrases ("machine wash", "gluten free"), and
option groups such as ``size`` and ``color``.

Pool sizes of attributes and option values are prime numbers, so the generator can pick
``k`` distinct entries as ``(start + j * step) % size`` without a per-product shuffle.

:data:`COLOR_SET` is WebShop's colour list (``web_agent_site/engine/normalize.py``), data that
its reward uses to normalise option values, so it is reproduced exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

#: WebShop's colour list, in its order (the first contained colour wins in ``normalize_color``).
COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue",
    "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper",
    "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant", "elephant", "espresso",
    "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green", "grey", "heather",
    "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime",
    "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum",
    "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger",
    "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)

#: WebShop's price ceilings for goals: 10, 20, ..., 990 dollars (``goal.py``'s ``PRICE_RANGE``).
PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))


@dataclass(frozen=True)
class ProductType:
    """One kind of product: what it is called, how shoppers search it, where it is shelved.

    ``noun`` ends the title (its nouns drive WebShop's title-noun type reward); ``query`` is the
    search term the product "was collected with" (WebShop's ``query`` field); ``path`` is the
    category path below the top-level department; ``options`` names option pools in
    :data:`OPTION_POOLS`; ``price`` is a typical price in dollars.
    """

    noun: str
    query: str
    path: tuple[str, ...]
    options: tuple[str, ...]
    price: float
    for_whom: tuple[str, ...] = ("",)


@dataclass(frozen=True)
class CategorySpec:
    """A top-level department: its product types and the words its titles are made of."""

    name: str
    department: str
    types: tuple[ProductType, ...]
    attributes: tuple[str, ...]  # prime length
    modifiers: tuple[str, ...]
    materials: tuple[str, ...]
    feature_templates: tuple[str, ...]


#: Option value pools; every length is prime (see the module docstring).
OPTION_POOLS: dict[str, tuple[str, tuple[str, ...]]] = {
    # pool id: (option name shown on the page, values)
    "apparel_size": ("size", (
        "x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large", "4x-large",
        "5x-large", "one size", "petite small", "petite medium", "plus 1x", "plus 2x", "plus 3x",
        "tall large", "tall x-large",
    )),  # 17
    "shoe_size": ("size", (
        "5", "5.5", "6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "11.5",
        "12", "13", "14", "6 wide", "7 wide", "8 wide", "9 wide", "10 wide", "11 wide",
    )),  # 23
    "fashion_color": ("color", (
        "black", "white", "navy", "heather grey", "charcoal heather", "burgundy", "olive green",
        "khaki", "light blue", "dark blue", "red", "pink", "lilac", "mint green", "mustard yellow",
        "camel", "coral", "teal", "ivory", "leopard print", "camo", "rust orange", "wine red",
        "royal blue", "black white stripe", "green stripe", "oatmeal heather", "taupe", "plum",
    )),  # 29
    "shade": ("color", (
        "01 ivory", "02 porcelain", "03 natural beige", "04 sand", "05 warm honey", "06 caramel",
        "07 chestnut", "08 espresso", "nude pink", "rose gold", "berry wine", "coral crush",
        "classic red", "mauve", "peach", "bronze glow", "champagne", "plum", "cocoa", "clear",
        "soft lilac", "midnight blue", "emerald", "taupe", "cherry", "blush", "fuchsia", "cranberry",
        "copper", "mocha", "sunset orange",
    )),  # 31
    "beauty_size": ("size", (
        "0.5 fl oz (pack of 1)", "1 fl oz (pack of 1)", "1.7 fl oz (pack of 1)", "3.4 fl oz (pack of 1)",
        "6.7 fl oz (pack of 1)", "8 fl oz (pack of 2)", "12 fl oz (pack of 1)", "16 fl oz (pack of 3)",
        "travel size", "2 count (pack of 1)", "3 count (pack of 2)", "4 ounce", "5.3 ounce",
    )),  # 13
    "scent": ("scent", (
        "lavender", "vanilla", "unscented", "bright citrus", "coconut", "fresh linen", "rose",
        "eucalyptus mint", "sandalwood", "ocean breeze", "green tea", "cherry blossom", "amber",
    )),  # 13
    "device_color": ("color", (
        "black", "white", "silver", "space gray", "rose gold", "midnight blue", "graphite",
        "forest green", "sky blue", "coral red", "sand", "purple", "champagne gold",
    )),  # 13
    "capacity": ("size", (
        "32gb", "64gb", "128gb", "256gb", "512gb", "1tb", "2tb", "4tb", "8tb", "16gb", "6 feet",
        "10 feet", "3 pack", "2 pack", "1 pack", "15 inch", "24 inch", "27 inch", "32 inch",
    )),  # 19
    "style": ("style", (
        "standard", "pro", "max", "lite", "bundle", "with case", "without remote", "usb-c",
        "wireless", "wired", "bluetooth 5.0", "dual band", "4k", "1080p", "international version",
        "renewed", "gen 2", "gen 3", "compact", "premium",
    )) + (),  # 20 -> trimmed below to a prime
    "furniture_color": ("color", (
        "walnut", "espresso", "white oak", "rustic brown", "black", "grey", "natural wood",
        "navy blue", "beige", "dark green", "light grey", "cream", "teal", "cherry", "gold",
        "charcoal", "ivory", "blush pink", "mustard", "cognac",
        "sand", "slate", "stone", "brown fabric", "black metal", "white marble", "distressed white",
        "driftwood", "mocha",
    )),  # 29
    "furniture_size": ("size", (
        "twin", "full", "queen", "king", "california king", "24 inch", "30 inch", "36 inch",
        "48 inch", "60 inch", "72 inch", "2 pack", "4 pack", "set of 2", "set of 4", "small",
        "medium", "large", "x-large", "40\" w x 20\" d", "55\" w x 16\" d", "31.5 x 15.7 in",
        "counter height", "bar height", "one size", "3 tier", "5 tier", "6 drawer", "2 drawer",
        "single", "double",
    )),  # 31
    "flavor": ("flavor name", (
        "original", "sea salt", "barbecue", "sour cream & onion", "honey roasted", "dark chocolate",
        "milk chocolate", "peanut butter", "strawberry", "vanilla bean", "cinnamon", "maple",
        "salted caramel", "jalapeno", "garlic herb", "lemon", "mixed berry", "french vanilla",
        "hazelnut", "mango", "chai spice", "variety pack", "unsweetened", "mint", "coconut",
        "cherry", "apple cinnamon", "pumpkin spice", "matcha",
    )),  # 29
    "food_size": ("size", (
        "1 pound (pack of 1)", "2 pound (pack of 1)", "8 ounce (pack of 2)", "12 ounce (pack of 6)",
        "16 ounce (pack of 4)", "24 count (pack of 1)", "40 count (pack of 1)", "1.5 ounce (pack of 24)",
        "5.3 ounce (pack of 12)", "3.5 ounce (pack of 6)", "32 fl oz (pack of 2)", "6 count",
        "12 count", "100 count", "4.4 pound",
        "2.2 pound", "7 ounce (pack of 3)",
    )),  # 17
}
# keep every pool prime-sized (the stride trick needs it)
_style_name, _style_values = OPTION_POOLS["style"]
OPTION_POOLS["style"] = (_style_name, _style_values[:19])


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


_FASHION = CategorySpec(
    name="fashion",
    department="Clothing, Shoes & Jewelry",
    types=(
        ProductType("running shoes", "men's running shoes", ("Men", "Shoes", "Athletic", "Running"), ("shoe_size", "fashion_color"), 65.0, ("for men", "for women", "")),
        ProductType("sneakers", "women's sneakers", ("Women", "Shoes", "Fashion Sneakers"), ("shoe_size", "fashion_color"), 55.0, ("for women", "for men", "")),
        ProductType("hiking boots", "hiking boots", ("Men", "Shoes", "Outdoor", "Hiking & Trekking"), ("shoe_size", "fashion_color"), 95.0, ("for men", "for women")),
        ProductType("sandals", "women's sandals", ("Women", "Shoes", "Sandals"), ("shoe_size", "fashion_color"), 35.0, ("for women", "")),
        ProductType("slippers", "house slippers", ("Women", "Shoes", "Slippers"), ("shoe_size", "fashion_color"), 25.0, ("for women", "for men")),
        ProductType("hoodie", "men's hoodies & sweatshirts", ("Men", "Clothing", "Fashion Hoodies & Sweatshirts"), ("apparel_size", "fashion_color"), 40.0, ("for men", "for women", "")),
        ProductType("t-shirt", "men's t-shirts", ("Men", "Clothing", "Shirts", "T-Shirts"), ("apparel_size", "fashion_color"), 18.0, ("for men", "for women", "")),
        ProductType("jumpsuit", "women's jumpsuits, rompers & overalls", ("Women", "Clothing", "Jumpsuits, Rompers & Overalls"), ("apparel_size", "fashion_color"), 38.0, ("for women",)),
        ProductType("yoga pants", "women's leggings", ("Women", "Clothing", "Active", "Leggings"), ("apparel_size", "fashion_color"), 28.0, ("for women",)),
        ProductType("denim jeans", "men's jeans", ("Men", "Clothing", "Jeans"), ("apparel_size", "fashion_color"), 45.0, ("for men", "for women")),
        ProductType("rain jacket", "women's coats, jackets & vests", ("Women", "Clothing", "Coats, Jackets & Vests"), ("apparel_size", "fashion_color"), 70.0, ("for women", "for men")),
        ProductType("swimsuit", "women's swimsuits & cover ups", ("Women", "Clothing", "Swimsuits & Cover Ups"), ("apparel_size", "fashion_color"), 32.0, ("for women",)),
        ProductType("dress shirt", "men's dress shirts", ("Men", "Clothing", "Shirts", "Dress Shirts"), ("apparel_size", "fashion_color"), 35.0, ("for men",)),
        ProductType("pajama set", "women's sleepwear", ("Women", "Clothing", "Lingerie, Sleep & Lounge", "Sleep & Lounge"), ("apparel_size", "fashion_color"), 30.0, ("for women", "for men")),
        ProductType("wool socks", "men's socks", ("Men", "Clothing", "Socks"), ("apparel_size", "fashion_color"), 15.0, ("for men", "for women", "")),
        ProductType("baseball cap", "baseball caps", ("Men", "Accessories", "Hats & Caps", "Baseball Caps"), ("fashion_color",), 16.0, ("for men", "for women", "")),
        ProductType("leather belt", "men's belts", ("Men", "Accessories", "Belts"), ("apparel_size", "fashion_color"), 22.0, ("for men", "for women")),
        ProductType("crossbody bag", "women's handbags", ("Women", "Handbags & Wallets", "Crossbody Bags"), ("fashion_color",), 42.0, ("for women",)),
        ProductType("wrist watch", "men's wrist watches", ("Men", "Watches", "Wrist Watches"), ("fashion_color",), 85.0, ("for men", "for women")),
    ),
    attributes=(
        "machine wash", "hand wash", "slim fit", "relaxed fit", "regular fit", "long sleeve",
        "short sleeve", "button closure", "elastic waistband", "high waist", "moisture wicking",
        "quick drying", "non slip", "rubber sole", "lace up", "arch support", "memory foam",
        "water resistant", "breathable", "stretch fabric", "polyester spandex", "cotton blend",
        "tummy control", "wide leg", "daily wear", "drawstring closure", "pull on", "faux fur",
        "zipper closure", "lightweight", "anti odor", "steel toe", "adjustable strap", "wash cold",
        "soft material", "tumble dry", "classic fit",
    ),  # 37
    modifiers=("classic", "casual", "sport", "vintage", "premium", "essential", "comfort", "ultra", "active", "urban", "heritage", "performance", "everyday", "lightweight", "cozy"),
    materials=("cotton", "fleece", "leather", "suede", "denim", "knit", "mesh", "wool", "linen", "nylon", "canvas", "satin", "jersey", "polyester", "bamboo"),
    feature_templates=(
        "{Attr} design for all-day comfort",
        "Made with {material} that keeps its shape wash after wash",
        "{Attr}: easy care and a clean look for {use}",
        "Perfect for {use}, travel and weekend outings",
        "Size up if you prefer a looser feel",
    ),
)

_MAKEUP = CategorySpec(
    name="makeup",
    department="Beauty & Personal Care",
    types=(
        ProductType("deodorant", "deodorant", ("Personal Care", "Deodorants & Antiperspirants", "Deodorant"), ("scent", "beauty_size"), 11.0),
        ProductType("shampoo", "shampoo", ("Hair Care", "Shampoo & Conditioner", "Shampoos"), ("scent", "beauty_size"), 14.0),
        ProductType("face moisturizer", "face moisturizer", ("Skin Care", "Face", "Creams & Moisturizers", "Face Moisturizers"), ("beauty_size",), 22.0),
        ProductType("lipstick", "lipstick", ("Makeup", "Lips", "Lipstick"), ("shade",), 12.0),
        ProductType("foundation", "liquid foundation", ("Makeup", "Face", "Foundation"), ("shade", "beauty_size"), 24.0),
        ProductType("eyeshadow palette", "eyeshadow palette", ("Makeup", "Eyes", "Eyeshadow"), ("shade",), 19.0),
        ProductType("nail polish", "nail polish", ("Foot, Hand & Nail Care", "Nail Art & Polish", "Nail Polish"), ("shade", "beauty_size"), 9.0),
        ProductType("hair extensions", "hair extensions", ("Hair Care", "Hair Extensions, Wigs & Accessories", "Hair Extensions"), ("shade", "beauty_size"), 35.0),
        ProductType("body wash", "body wash", ("Personal Care", "Bath & Bathing Accessories", "Body Washes"), ("scent", "beauty_size"), 10.0),
        ProductType("sunscreen lotion", "sunscreen", ("Skin Care", "Sunscreens & Tanning Products", "Sunscreens"), ("beauty_size",), 16.0),
        ProductType("eau de parfum", "perfume for women", ("Fragrance", "Women's", "Eau de Parfum"), ("scent", "beauty_size"), 48.0),
        ProductType("makeup brush set", "makeup brushes", ("Tools & Accessories", "Makeup Brushes & Tools", "Brush Sets"), ("device_color",), 15.0),
        ProductType("toothpaste", "fluoride free toothpaste", ("Oral Care", "Toothpaste"), ("scent", "beauty_size"), 7.0),
        ProductType("beard oil", "beard oil", ("Shave & Hair Removal", "Men's", "Beard & Mustache Care", "Beard Oil"), ("scent", "beauty_size"), 13.0),
        ProductType("hair dryer", "hair dryer", ("Hair Care", "Styling Tools & Appliances", "Hair Dryers"), ("device_color",), 45.0),
        ProductType("eye cream", "eye cream", ("Skin Care", "Eyes", "Creams"), ("beauty_size",), 26.0),
        ProductType("bath bombs", "bath bombs", ("Personal Care", "Bath & Bathing Accessories", "Bath Bombs"), ("scent", "beauty_size"), 18.0),
    ),
    attributes=(
        "long lasting", "cruelty free", "paraben free", "sulfate free", "fluoride free", "alcohol free",
        "natural ingredients", "sensitive skin", "dry skin", "oily skin", "fine lines", "dark circles",
        "hair growth", "damaged hair", "easy apply", "travel size", "tea tree", "essential oils",
        "coconut oil", "shea butter", "vitamin c", "hyaluronic acid", "aloe vera", "argan oil",
        "certified organic", "non toxic", "dermatologist tested", "fragrance free", "high quality",
        "easy carry", "anti aging",
    ),  # 31
    modifiers=("natural", "organic", "daily", "intense", "gentle", "luxury", "professional", "pure", "radiant", "fresh", "botanical", "advanced", "clinical", "classic", "herbal"),
    materials=("charcoal", "rosewater", "keratin", "collagen", "jojoba", "biotin", "retinol", "honey", "oatmeal", "clay", "mineral", "silk", "bamboo", "cocoa butter", "green tea"),
    feature_templates=(
        "{Attr} formula that suits every skin type",
        "Infused with {material} for a noticeable difference",
        "{Attr}: gentle enough for {use}",
        "Dermatologist reviewed and made without harsh chemicals",
        "Results you can see in as little as two weeks",
    ),
)

_ELECTRONICS = CategorySpec(
    name="electronics",
    department="Electronics",
    types=(
        ProductType("wireless earbuds", "wireless earbuds", ("Headphones, Earbuds & Accessories", "Earbuds"), ("device_color", "style"), 49.0),
        ProductType("bluetooth speaker", "portable bluetooth speaker", ("Portable Audio & Video", "Portable Speakers & Docks", "Portable Bluetooth Speakers"), ("device_color",), 39.0),
        ProductType("power cord", "power cord", ("Accessories & Supplies", "Audio & Video Accessories", "Cables", "Power Cords"), ("capacity",), 9.0),
        ProductType("usb c cable", "usb c cable", ("Computers & Accessories", "Computer Accessories & Peripherals", "Cables & Accessories", "USB Cables"), ("capacity", "device_color"), 11.0),
        ProductType("phone case", "iphone case", ("Cell Phones & Accessories", "Cases, Holsters & Sleeves", "Basic Cases"), ("device_color", "style"), 14.0),
        ProductType("portable charger", "portable charger power bank", ("Cell Phones & Accessories", "Accessories", "Chargers & Power Adapters", "Portable Power Banks"), ("device_color", "capacity"), 29.0),
        ProductType("gaming mouse", "gaming mouse", ("Computers & Accessories", "Computer Accessories & Peripherals", "Keyboards, Mice & Accessories", "Mice"), ("device_color", "style"), 35.0),
        ProductType("mechanical keyboard", "mechanical keyboard", ("Computers & Accessories", "Computer Accessories & Peripherals", "Keyboards, Mice & Accessories", "Keyboards"), ("device_color", "style"), 69.0),
        ProductType("computer monitor", "computer monitor", ("Computers & Accessories", "Monitors"), ("capacity", "style"), 189.0),
        ProductType("flash drive", "usb flash drive", ("Computers & Accessories", "Data Storage", "USB Flash Drives"), ("capacity",), 15.0),
        ProductType("external hard drive", "external hard drive", ("Computers & Accessories", "Data Storage", "External Hard Drives"), ("capacity", "device_color"), 79.0),
        ProductType("soundbar", "tv soundbar", ("Home Audio", "Speakers", "Sound Bars"), ("style",), 129.0),
        ProductType("security camera", "home security camera", ("Camera & Photo", "Video Surveillance", "Surveillance Cameras"), ("style", "capacity"), 59.0),
        ProductType("streaming media player", "streaming media player", ("Television & Video", "Streaming Media Players"), ("style",), 49.0),
        ProductType("smart watch", "smart watch", ("Wearable Technology", "Smartwatches"), ("device_color", "style"), 149.0),
        ProductType("tablet stand", "tablet stand", ("Computers & Accessories", "Tablet Accessories", "Stands"), ("device_color",), 19.0),
        ProductType("hdmi cable", "hdmi cable", ("Accessories & Supplies", "Audio & Video Accessories", "Cables", "HDMI Cables"), ("capacity",), 12.0),
        ProductType("wifi router", "wifi router", ("Computers & Accessories", "Networking Products", "Routers"), ("style",), 89.0),
    ),
    attributes=(
        "high speed", "fast charging", "wireless charging", "noise cancelling", "long battery life",
        "easy install", "easy use", "plug play", "ultra hd", "high definition", "stereo sound",
        "usb port", "dual band", "water resistant", "heavy duty", "aluminum alloy", "hands free",
        "touch control", "quad core", "wall mounted", "high performance", "light weight",
        "carrying case", "power delivery", "motion detection", "night vision", "ul listed",
        "gold plated", "non slip", "easy carry", "compact size",
    ),  # 31
    modifiers=("pro", "ultra", "smart", "mini", "max", "plus", "slim", "rugged", "elite", "compact", "turbo", "nano", "prime", "edge", "core"),
    materials=("aluminum", "braided nylon", "silicone", "tempered glass", "abs plastic", "carbon fiber", "stainless steel", "copper", "rubberized", "matte", "leather", "polycarbonate", "zinc alloy", "titanium", "fabric"),
    feature_templates=(
        "{Attr}: works with most phones, tablets and laptops",
        "Built from {material} to survive daily drops",
        "{Attr} so you can spend less time waiting",
        "What you get: the device, a user manual and a worry-free warranty",
        "Set up in minutes for {use}",
    ),
)

_FURNITURE = CategorySpec(
    name="furniture",
    department="Home & Kitchen",
    types=(
        ProductType("bookshelf", "bookcase", ("Furniture", "Home Office Furniture", "Bookcases"), ("furniture_color", "furniture_size"), 89.0),
        ProductType("office chair", "office chair", ("Furniture", "Home Office Furniture", "Home Office Chairs", "Desk Chairs"), ("furniture_color",), 129.0),
        ProductType("coffee table", "coffee table", ("Furniture", "Living Room Furniture", "Tables", "Coffee Tables"), ("furniture_color", "furniture_size"), 110.0),
        ProductType("nightstand", "nightstand", ("Furniture", "Bedroom Furniture", "Nightstands"), ("furniture_color", "furniture_size"), 69.0),
        ProductType("bar stools", "bar stools", ("Furniture", "Game & Recreation Room Furniture", "Home Bar Furniture", "Barstools"), ("furniture_color", "furniture_size"), 120.0),
        ProductType("platform bed frame", "bed frame", ("Furniture", "Bedroom Furniture", "Beds, Frames & Bases", "Beds"), ("furniture_size", "furniture_color"), 210.0),
        ProductType("tv stand", "tv stand", ("Furniture", "Living Room Furniture", "TV & Media Furniture", "Television Stands & Entertainment Centers"), ("furniture_color", "furniture_size"), 140.0),
        ProductType("accent chair", "accent chair", ("Furniture", "Living Room Furniture", "Chairs", "Accent Chairs"), ("furniture_color",), 160.0),
        ProductType("storage ottoman", "storage ottoman", ("Furniture", "Living Room Furniture", "Ottomans"), ("furniture_color", "furniture_size"), 55.0),
        ProductType("dining table set", "dining table", ("Furniture", "Kitchen & Dining Room Furniture", "Table & Chair Sets"), ("furniture_color", "furniture_size"), 260.0),
        ProductType("standing desk", "standing desk", ("Furniture", "Home Office Furniture", "Home Office Desks"), ("furniture_color", "furniture_size"), 230.0),
        ProductType("shoe rack", "shoe rack", ("Storage & Organization", "Clothing & Closet Storage", "Shoe Organizers"), ("furniture_color", "furniture_size"), 35.0),
        ProductType("wall mirror", "wall mirror", ("Home Décor Products", "Mirrors", "Wall-Mounted Mirrors"), ("furniture_color", "furniture_size"), 75.0),
        ProductType("floor lamp", "floor lamp", ("Lighting & Ceiling Fans", "Lamps & Shades", "Floor Lamps"), ("furniture_color",), 65.0),
        ProductType("throw pillow covers", "throw pillow covers", ("Home Décor Products", "Decorative Pillows, Inserts & Covers", "Throw Pillow Covers"), ("furniture_color", "furniture_size"), 18.0),
        ProductType("sofa couch", "sofa", ("Furniture", "Living Room Furniture", "Sofas & Couches"), ("furniture_color", "furniture_size"), 480.0),
        ProductType("memory foam mattress", "mattress", ("Furniture", "Bedroom Furniture", "Mattresses & Box Springs", "Mattresses"), ("furniture_size",), 320.0),
    ),
    attributes=(
        "easy assemble", "easy clean", "solid wood", "wood finish", "metal frame", "storage space",
        "living room", "dining room", "bedroom", "home office", "mid century", "modern style",
        "space saving", "heavy duty", "non slip", "high density", "lumbar support", "stainless steel",
        "faux leather", "engineered wood", "spot clean", "ready use", "assembly required",
        "living room furniture", "contemporary design", "steel frame", "white item", "button tufted",
        "pu leather", "height adjustable", "lead free",
    ),  # 31
    modifiers=("modern", "rustic", "farmhouse", "industrial", "scandinavian", "classic", "minimalist", "vintage", "contemporary", "mid-century", "coastal", "luxe", "compact", "transitional", "boho"),
    materials=("oak", "walnut", "pine", "bamboo", "velvet", "linen", "rattan", "marble", "metal", "acacia", "mdf", "teak", "glass", "boucle", "mango wood"),
    feature_templates=(
        "{Attr}: sturdy build that holds up to {use}",
        "Crafted from {material} with a durable finish",
        "{Attr} with clear step-by-step instructions",
        "Fits small apartments, dorms and family homes",
        "Wipe with a damp cloth; avoid harsh cleaners",
    ),
)

_FOOD = CategorySpec(
    name="food",
    department="Grocery & Gourmet Food",
    types=(
        ProductType("potato chips", "potato chips", ("Snack Foods", "Chips & Crisps", "Potato Chips"), ("flavor", "food_size"), 18.0),
        ProductType("protein bars", "protein bars", ("Snack Foods", "Bars", "Protein Bars"), ("flavor", "food_size"), 24.0),
        ProductType("ground coffee", "ground coffee", ("Beverages", "Coffee, Tea & Cocoa", "Coffee", "Ground Coffee"), ("flavor", "food_size"), 14.0),
        ProductType("green tea bags", "green tea", ("Beverages", "Coffee, Tea & Cocoa", "Tea", "Green"), ("flavor", "food_size"), 9.0),
        ProductType("trail mix", "trail mix", ("Snack Foods", "Trail Mix"), ("flavor", "food_size"), 15.0),
        ProductType("dark chocolate bar", "dark chocolate", ("Candy & Chocolate", "Chocolate", "Chocolate Bars"), ("flavor", "food_size"), 12.0),
        ProductType("beef jerky", "beef jerky", ("Meat & Seafood", "Jerky & Dried Meats", "Jerky"), ("flavor", "food_size"), 19.0),
        ProductType("olive oil", "extra virgin olive oil", ("Pantry Staples", "Cooking & Baking", "Oils, Vinegars & Salad Dressings", "Oils"), ("food_size",), 17.0),
        ProductType("pasta sauce", "pasta sauce", ("Pantry Staples", "Jarred & Canned", "Sauces", "Pasta Sauces"), ("flavor", "food_size"), 8.0),
        ProductType("granola cereal", "granola", ("Breakfast Foods", "Cereals", "Granola"), ("flavor", "food_size"), 11.0),
        ProductType("sparkling water", "sparkling water", ("Beverages", "Bottled Beverages, Water & Drink Mixes", "Water", "Sparkling Water"), ("flavor", "food_size"), 16.0),
        ProductType("mixed nuts", "mixed nuts", ("Snack Foods", "Nuts & Seeds", "Mixed Nuts"), ("flavor", "food_size"), 21.0),
        ProductType("gummy candy", "gummy candy", ("Candy & Chocolate", "Gummy Candy"), ("flavor", "food_size"), 10.0),
        ProductType("baking flour", "almond flour", ("Pantry Staples", "Cooking & Baking", "Flours & Meals"), ("food_size",), 13.0),
        ProductType("honey jar", "raw honey", ("Pantry Staples", "Jams, Jellies & Sweet Spreads", "Honey"), ("flavor", "food_size"), 15.0),
        ProductType("seasoning blend", "seasoning", ("Pantry Staples", "Herbs, Spices & Seasonings", "Mixed Spices & Seasonings"), ("flavor", "food_size"), 7.0),
        ProductType("instant oatmeal", "oatmeal", ("Breakfast Foods", "Oatmeal"), ("flavor", "food_size"), 9.0),
    ),
    attributes=(
        "gluten free", "sugar free", "low carb", "keto friendly", "non gmo", "usda organic",
        "high protein", "dairy free", "plant based", "kosher certified", "low calorie", "no artificial",
        "caffeine free", "nut free", "soy free", "grain free", "zero sugar", "individually wrapped",
        "ready eat", "great gift", "resealable bag", "natural flavors", "low sodium", "fat free",
        "whole grain", "vegan friendly", "shelf stable", "small batch", "fair trade", "simple ingredients",
        "baked fried",
    ),  # 31
    modifiers=("classic", "organic", "artisan", "gourmet", "homestyle", "premium", "original", "family size", "kettle cooked", "everyday", "wholesome", "crunchy", "rich", "smooth", "bold"),
    materials=("almond", "oat", "quinoa", "cashew", "cocoa", "coconut", "rice", "sea salt", "honey", "peanut", "cane sugar", "chickpea", "arabica", "matcha", "maple"),
    feature_templates=(
        "{Attr} and full of flavor for {use}",
        "Made with real {material} and nothing you cannot pronounce",
        "{Attr}: a smart choice for lunch boxes and snacking on the go",
        "Packed fresh and sealed to keep every bite crisp",
        "Store in a cool, dry place after opening",
    ),
)

#: The five departments of the generated shop.
CATEGORIES: tuple[CategorySpec, ...] = (_FASHION, _MAKEUP, _ELECTRONICS, _FURNITURE, _FOOD)

#: Uses that feature templates fill ``{use}`` with.
USES: tuple[str, ...] = (
    "everyday use", "the gym", "the office", "travel", "the whole family", "gifting",
    "weekend trips", "busy mornings", "small spaces", "outdoor adventures", "late nights",
)

_BRAND_HEADS = (
    "Al", "Bel", "Cor", "Dun", "El", "Fen", "Gra", "Hal", "Ix", "Jor", "Kel", "Lum", "Mar", "Nor",
    "Ox", "Pel", "Quin", "Ros", "Sol", "Tor", "Ul", "Vel", "Wyn", "Xan", "Yor", "Zen", "Bram",
    "Cal", "Dax", "Ev", "Fal", "Gil", "Har", "Iv", "Jun", "Kor", "Lin", "Mav", "Nev", "Orr",
)
_BRAND_TAILS = (
    "ora", "ex", "ina", "ton", "ix", "ara", "eon", "ly", "ano", "ster", "wick", "field", "mont",
    "va", "ric", "dale", "vo", "ley", "ant", "ium", "oria", "by", "gate", "co", "ford",
)

#: Brand names: every head+tail pair (1,000 brands), e.g. "Alora", "Belex", "Corina".
BRANDS: tuple[str, ...] = tuple(h + t for h in _BRAND_HEADS for t in _BRAND_TAILS)

# Sanity of the data above, checked once at import (cheap).
for _spec in CATEGORIES:
    assert _is_prime(len(_spec.attributes)), (_spec.name, len(_spec.attributes))
    for _t in _spec.types:
        assert all(o in OPTION_POOLS for o in _t.options), _t
for _pool, (_name, _values) in OPTION_POOLS.items():
    assert _is_prime(len(_values)), (_pool, len(_values))
    assert len(set(_values)) == len(_values), _pool
