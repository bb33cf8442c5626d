"""Word lists the catalog generator draws from: product types, brands and sentence parts.

Each :class:`ProductType` is one kind of product a shopper asks for (a query in WebShop's sense:
"hair extensions", "office chair"), with its category path, the nouns its titles use, the pool
of attributes its products may have, its buying options and its price range. Five top
categories mirror WebShop's (beauty, electronics, fashion, food, furniture), eight types each.

Everything here is data, written for this project; the generator in :mod:`.catalog` combines it
with a seeded random generator so that a catalog is a pure function of its seed and size.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProductType:
    """One kind of product, from which many concrete products are drawn."""

    category: str
    query: str
    path: tuple[str, ...]
    heads: tuple[str, ...]  # title head phrases, Title Case ("Clip in Hair Extensions")
    styles: tuple[str, ...]  # words that vary titles ("Long Straight", "Wavy")
    attributes: tuple[str, ...]  # lowercase attribute phrases, 8 or more
    options: dict[str, tuple[str, ...]] = field(hash=False)
    price: tuple[float, float] = (10.0, 50.0)
    audiences: tuple[str, ...] = ("",)


BEAUTY = "Beauty & Personal Care"
CLOTHING = "Clothing, Shoes & Jewelry"
ELECTRONICS = "Electronics"
GROCERY = "Grocery & Gourmet Food"
HOME = "Home & Kitchen"

_BASIC_COLORS = ("black", "white", "gray", "navy blue", "red", "pink", "green", "beige")

PRODUCT_TYPES: tuple[ProductType, ...] = (
    # ---------------------------------------------------------------- beauty
    ProductType(
        "beauty", "hair extensions",
        (BEAUTY, "Hair Care", "Hair Extensions, Wigs & Accessories", "Hair Extensions"),
        ("Clip in Hair Extensions", "Hair Extensions", "Ponytail Extension"),
        ("Long Straight", "Wavy", "Curly", "Thick", "Silky"),
        ("natural looking", "heat resistant", "long lasting", "easy to apply", "high quality",
         "synthetic hair", "human hair", "tangle free", "lightweight"),
        {"color": ("natural black", "dark brown", "light brown", "ash blonde", "honey blonde",
                   "auburn", "platinum blonde", "burgundy"),
         "size": ("14 inch", "18 inch", "20 inch", "22 inch", "24 inch")},
        (12.0, 60.0), ("for Women", "for Girls", ""),
    ),
    ProductType(
        "beauty", "face moisturizer",
        (BEAUTY, "Skin Care", "Face", "Creams & Moisturizers", "Face Moisturizers"),
        ("Face Moisturizer", "Daily Face Cream", "Hydrating Gel Cream"),
        ("Daily", "Lightweight", "Rich", "Overnight", "Soothing"),
        ("fragrance free", "paraben free", "cruelty free", "for sensitive skin", "for dry skin",
         "non greasy", "hyaluronic acid", "natural ingredients", "oil free"),
        {"size": ("1.7 fl oz", "2.5 fl oz", "3.4 fl oz")},
        (9.0, 45.0), ("for Women", "for Men", ""),
    ),
    ProductType(
        "beauty", "lipstick",
        (BEAUTY, "Makeup", "Lips", "Lipstick"),
        ("Matte Lipstick", "Liquid Lipstick", "Lipstick Set"),
        ("Velvet", "Creamy", "Satin", "Bold", "Classic"),
        ("long lasting", "waterproof", "cruelty free", "highly pigmented", "paraben free",
         "moisturizing", "transfer proof", "vegan"),
        {"color": ("ruby red", "nude pink", "berry", "coral", "mauve", "deep plum", "rose",
                   "brick red")},
        (6.0, 30.0), ("for Women", ""),
    ),
    ProductType(
        "beauty", "shampoo",
        (BEAUTY, "Hair Care", "Shampoo & Conditioner", "Shampoos"),
        ("Shampoo", "Shampoo and Conditioner Set", "Clarifying Shampoo"),
        ("Daily", "Volumizing", "Repair", "Gentle", "Deep Cleansing"),
        ("sulfate free", "paraben free", "for dry hair", "for color treated hair",
         "natural ingredients", "tea tree oil", "argan oil", "dandruff control", "cruelty free"),
        {"size": ("8.5 fl oz", "16.9 fl oz", "33.8 fl oz"),
         "scent": ("lavender", "coconut", "mint", "unscented", "citrus")},
        (8.0, 40.0), ("for Women", "for Men", ""),
    ),
    ProductType(
        "beauty", "nail polish",
        (BEAUTY, "Foot, Hand & Nail Care", "Nail Art & Polish", "Nail Polish"),
        ("Nail Polish", "Gel Nail Polish Set", "Quick Dry Nail Polish"),
        ("Glossy", "Shimmer", "Classic", "Pastel", "Neon"),
        ("long lasting", "quick drying", "non toxic", "chip resistant", "high gloss",
         "easy to apply", "cruelty free", "vegan"),
        {"color": ("classic red", "soft pink", "black", "white", "nude", "glitter gold",
                   "navy blue", "lavender")},
        (5.0, 35.0), ("for Women", "for Girls", ""),
    ),
    ProductType(
        "beauty", "makeup brushes",
        (BEAUTY, "Tools & Accessories", "Makeup Brushes & Tools", "Brush Sets"),
        ("Makeup Brush Set", "Foundation Brush", "Makeup Brushes"),
        ("Premium", "Professional", "Travel", "Kabuki", "Complete"),
        ("synthetic bristles", "cruelty free", "easy to clean", "travel size", "soft bristles",
         "high quality", "storage case", "dense bristles"),
        {"color": ("black", "rose gold", "pink", "white", "champagne"),
         "size": ("5 pieces", "12 pieces", "16 pieces")},
        (8.0, 40.0),
    ),
    ProductType(
        "beauty", "sunscreen",
        (BEAUTY, "Skin Care", "Sunscreens & Tanning Products", "Sunscreens"),
        ("Sunscreen Lotion", "Mineral Sunscreen", "Sunscreen Spray"),
        ("Sport", "Daily", "Clear", "Sheer", "Kids"),
        ("spf 50", "water resistant", "reef safe", "oil free", "fragrance free",
         "for sensitive skin", "broad spectrum", "non greasy"),
        {"size": ("3 fl oz", "6 fl oz", "2 pack")},
        (7.0, 30.0),
    ),
    ProductType(
        "beauty", "electric toothbrush",
        (BEAUTY, "Oral Care", "Toothbrushes & Accessories", "Powered Toothbrushes"),
        ("Electric Toothbrush", "Sonic Toothbrush", "Rechargeable Toothbrush"),
        ("Smart", "Slim", "Pro", "Whitening", "Travel"),
        ("rechargeable", "long battery life", "smart timer", "waterproof", "travel case",
         "replacement heads", "for sensitive teeth", "quiet motor"),
        {"color": ("white", "black", "pink", "blue", "mint green")},
        (20.0, 90.0), ("for Adults", "for Kids", ""),
    ),
    # ----------------------------------------------------------- electronics
    ProductType(
        "electronics", "wireless earbuds",
        (ELECTRONICS, "Headphones, Earbuds & Accessories", "Headphones & Earbuds",
         "Earbud Headphones"),
        ("Wireless Earbuds", "Bluetooth Earbuds", "True Wireless Earphones"),
        ("Sport", "Mini", "Pro", "Compact", "Premium"),
        ("noise cancelling", "long battery life", "water resistant", "bluetooth 5.3",
         "charging case", "built in microphone", "fast charging", "touch control",
         "high fidelity sound"),
        {"color": ("black", "white", "navy blue", "rose gold", "gray")},
        (15.0, 120.0),
    ),
    ProductType(
        "electronics", "phone case",
        ("Cell Phones & Accessories", "Cases, Holsters & Sleeves", "Basic Cases"),
        ("Phone Case", "Shockproof Case", "Slim Case"),
        ("Clear", "Rugged", "Matte", "Glitter", "Leather"),
        ("shockproof", "slim fit", "wireless charging compatible", "scratch resistant",
         "drop protection", "raised edges", "non slip grip", "clear back"),
        {"color": ("black", "clear", "blue", "purple", "green", "pink"),
         "style": ("iphone 14", "iphone 15", "iphone 15 pro", "galaxy s23", "galaxy s24",
                   "pixel 8")},
        (6.0, 30.0),
    ),
    ProductType(
        "electronics", "usb c charger",
        ("Cell Phones & Accessories", "Accessories", "Chargers & Power Adapters",
         "Wall Chargers"),
        ("USB C Charger", "Fast Wall Charger", "Charging Block"),
        ("Compact", "Dual Port", "Travel", "Mini", "Universal"),
        ("fast charging", "foldable plug", "compact design", "dual port",
         "overheat protection", "gan technology", "travel friendly", "universal compatibility"),
        {"color": ("white", "black"), "style": ("20w", "30w", "45w", "65w", "100w")},
        (10.0, 50.0),
    ),
    ProductType(
        "electronics", "bluetooth speaker",
        (ELECTRONICS, "Portable Audio & Video", "Portable Speakers & Docks",
         "Portable Bluetooth Speakers"),
        ("Bluetooth Speaker", "Portable Speaker", "Wireless Speaker"),
        ("Mini", "Outdoor", "Party", "Rugged", "Smart"),
        ("waterproof", "long battery life", "stereo sound", "deep bass",
         "built in microphone", "portable design", "usb c charging", "outdoor use"),
        {"color": ("black", "blue", "red", "camo", "teal")},
        (20.0, 150.0),
    ),
    ProductType(
        "electronics", "hdmi cable",
        (ELECTRONICS, "Television & Video", "Accessories", "Cables", "HDMI Cables"),
        ("HDMI Cable", "High Speed HDMI Cable", "HDMI 2.1 Cable"),
        ("Ultra", "Premium", "Flat", "Slim", "Braided"),
        ("4k resolution", "high speed", "gold plated", "braided cable", "ethernet support",
         "8k resolution", "dolby atmos", "durable connectors"),
        {"size": ("3 feet", "6 feet", "10 feet", "15 feet"),
         "style": ("1 pack", "2 pack", "3 pack")},
        (5.0, 30.0),
    ),
    ProductType(
        "electronics", "wireless mouse",
        (ELECTRONICS, "Computers & Accessories", "Computer Accessories & Peripherals",
         "Keyboards, Mice & Accessories", "Mice"),
        ("Wireless Mouse", "Ergonomic Mouse", "Silent Mouse"),
        ("Slim", "Vertical", "Compact", "Travel", "Gaming"),
        ("ergonomic design", "silent click", "rechargeable", "usb receiver", "adjustable dpi",
         "long battery life", "plug and play", "bluetooth connection"),
        {"color": ("black", "white", "gray", "pink", "blue")},
        (9.0, 60.0), ("for Laptop", "for Computer", ""),
    ),
    ProductType(
        "electronics", "laptop stand",
        (ELECTRONICS, "Computers & Accessories", "Laptop Accessories", "Stands"),
        ("Laptop Stand", "Adjustable Laptop Stand", "Laptop Riser"),
        ("Portable", "Foldable", "Aluminum", "Vented", "Desktop"),
        ("adjustable height", "aluminum alloy", "foldable design", "heat dissipation",
         "non slip", "portable", "sturdy construction", "ergonomic design"),
        {"color": ("silver", "space gray", "black", "rose gold")},
        (15.0, 60.0), ("for Desk", ""),
    ),
    ProductType(
        "electronics", "smart watch",
        (ELECTRONICS, "Wearable Technology", "Smartwatches"),
        ("Smart Watch", "Fitness Tracker Watch", "Smartwatch"),
        ("Sport", "Classic", "Slim", "Rugged", "Square"),
        ("heart rate monitor", "sleep tracking", "waterproof", "long battery life",
         "gps tracking", "blood oxygen", "bluetooth calling", "step counter"),
        {"color": ("black", "silver", "rose gold", "pink", "green"), "size": ("40mm", "44mm")},
        (25.0, 200.0), ("for Men", "for Women", ""),
    ),
    # ---------------------------------------------------------------- fashion
    ProductType(
        "fashion", "men's t-shirt",
        (CLOTHING, "Men", "Clothing", "Shirts", "T-Shirts"),
        ("Men's T-Shirt", "Men's Crew Neck T-Shirt", "Men's Cotton Tee"),
        ("Classic", "Basic", "Graphic", "Slim", "Vintage"),
        ("machine wash", "cotton blend", "short sleeve", "regular fit", "moisture wicking",
         "tagless", "relaxed fit", "breathable fabric"),
        {"color": ("black", "white", "heather gray", "navy", "olive green", "burgundy",
                   "royal blue"),
         "size": ("small", "medium", "large", "x-large", "xx-large")},
        (8.0, 30.0),
    ),
    ProductType(
        "fashion", "women's dress",
        (CLOTHING, "Women", "Clothing", "Dresses", "Casual"),
        ("Women's Summer Dress", "Women's Maxi Dress", "Women's Casual Dress"),
        ("Boho", "Wrap", "Swing", "A Line", "Sundress"),
        ("machine wash", "v neck", "short sleeve", "with pockets", "floral print", "flowy",
         "high waist", "lightweight fabric"),
        {"color": ("black", "floral blue", "red", "green", "pink", "white", "yellow"),
         "size": ("small", "medium", "large", "x-large")},
        (18.0, 60.0),
    ),
    ProductType(
        "fashion", "men's running shoes",
        (CLOTHING, "Men", "Shoes", "Athletic", "Running"),
        ("Men's Running Shoes", "Men's Athletic Sneakers", "Men's Walking Shoes"),
        ("Road", "Trail", "Cushioned", "Knit", "Sport"),
        ("lightweight", "non slip", "breathable mesh", "rubber sole", "arch support",
         "memory foam", "shock absorbing", "lace up"),
        {"color": ("black", "white", "gray", "navy", "black white", "blue"),
         "size": ("7", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")},
        (25.0, 90.0),
    ),
    ProductType(
        "fashion", "women's yoga pants",
        (CLOTHING, "Women", "Clothing", "Active", "Active Pants", "Leggings"),
        ("Women's Yoga Pants", "High Waisted Leggings", "Workout Leggings"),
        ("Seamless", "Flare", "Capri", "Full Length", "Soft"),
        ("high waist", "tummy control", "with pockets", "squat proof", "moisture wicking",
         "four way stretch", "butt lifting", "machine wash"),
        {"color": ("black", "navy", "charcoal", "wine red", "olive", "dusty pink"),
         "size": ("x-small", "small", "medium", "large", "x-large")},
        (12.0, 45.0),
    ),
    ProductType(
        "fashion", "men's winter jacket",
        (CLOTHING, "Men", "Clothing", "Jackets & Coats", "Down & Down Alternative"),
        ("Men's Winter Jacket", "Men's Puffer Jacket", "Men's Hooded Coat"),
        ("Quilted", "Insulated", "Thermal", "Outdoor", "Parka"),
        ("water resistant", "windproof", "detachable hood", "zipper pockets", "warm lining",
         "packable", "machine wash", "lightweight"),
        {"color": ("black", "army green", "navy", "khaki", "dark gray"),
         "size": ("medium", "large", "x-large", "xx-large")},
        (40.0, 150.0),
    ),
    ProductType(
        "fashion", "women's sandals",
        (CLOTHING, "Women", "Shoes", "Sandals", "Flat Sandals"),
        ("Women's Flat Sandals", "Women's Slide Sandals", "Women's Platform Sandals"),
        ("Summer", "Strappy", "Casual", "Beach", "Braided"),
        ("arch support", "non slip", "open toe", "adjustable strap", "comfortable footbed",
         "rubber sole", "waterproof", "ankle strap"),
        {"color": ("black", "brown", "white", "beige", "gold", "silver"),
         "size": ("6", "6.5", "7", "7.5", "8", "8.5", "9", "10")},
        (15.0, 60.0),
    ),
    ProductType(
        "fashion", "athletic socks",
        (CLOTHING, "Men", "Clothing", "Socks", "Athletic Socks"),
        ("Athletic Crew Socks", "Cushioned Ankle Socks", "Running Socks"),
        ("Performance", "Low Cut", "Crew", "Sport", "Everyday"),
        ("moisture wicking", "cushioned sole", "arch support", "breathable", "cotton blend",
         "machine wash", "no show", "odor resistant"),
        {"color": ("black", "white", "gray", "multicolor"),
         "size": ("small", "medium", "large", "x-large")},
        (8.0, 25.0), ("for Men", "for Women", ""),
    ),
    ProductType(
        "fashion", "sunglasses",
        (CLOTHING, "Men", "Accessories", "Sunglasses & Eyewear Accessories", "Sunglasses"),
        ("Polarized Sunglasses", "Aviator Sunglasses", "Square Sunglasses"),
        ("Retro", "Classic", "Oversized", "Sport", "Round"),
        ("polarized lenses", "uv protection", "lightweight frame", "scratch resistant",
         "for driving", "unisex", "metal frame", "anti glare"),
        {"color": ("black", "tortoise", "gold", "silver", "brown")},
        (10.0, 60.0), ("for Men", "for Women", ""),
    ),
    # ------------------------------------------------------------------- food
    ProductType(
        "food", "coffee beans",
        (GROCERY, "Beverages", "Coffee, Tea & Cocoa", "Coffee", "Whole Coffee Beans"),
        ("Whole Bean Coffee", "Coffee Beans", "Espresso Beans"),
        ("Breakfast Blend", "House Blend", "Colombian", "Italian", "Morning"),
        ("dark roast", "medium roast", "organic", "fair trade", "single origin", "low acid",
         "arabica beans", "decaf"),
        {"size": ("12 ounce", "2 pound", "5 pound"),
         "flavor name": ("original", "french vanilla", "hazelnut", "mocha", "caramel")},
        (8.0, 45.0),
    ),
    ProductType(
        "food", "protein bars",
        (GROCERY, "Snack Foods", "Bars", "Protein Bars"),
        ("Protein Bars", "Protein Snack Bars", "Keto Protein Bars"),
        ("Chewy", "Crispy", "Soft Baked", "Layered", "Mini"),
        ("gluten free", "low sugar", "high protein", "keto friendly", "non gmo",
         "plant based", "individually wrapped", "no artificial sweeteners"),
        {"flavor name": ("chocolate peanut butter", "cookie dough", "birthday cake",
                         "salted caramel", "almond"),
         "size": ("12 count", "15 count", "24 count")},
        (12.0, 40.0),
    ),
    ProductType(
        "food", "green tea",
        (GROCERY, "Beverages", "Coffee, Tea & Cocoa", "Tea", "Green"),
        ("Green Tea Bags", "Matcha Green Tea", "Loose Leaf Green Tea"),
        ("Japanese", "Chinese", "Premium", "Everyday", "Ceremonial"),
        ("organic", "caffeine free", "non gmo", "individually wrapped", "antioxidant rich",
         "sugar free", "natural flavor", "kosher"),
        {"flavor name": ("original", "jasmine", "mint", "lemon", "ginger"),
         "size": ("20 count", "40 count", "100 count")},
        (5.0, 25.0),
    ),
    ProductType(
        "food", "mixed nuts",
        (GROCERY, "Snack Foods", "Nuts & Seeds", "Mixed Nuts"),
        ("Mixed Nuts", "Roasted Almonds", "Trail Mix"),
        ("Deluxe", "Roasted", "Raw", "Premium", "Classic"),
        ("unsalted", "lightly salted", "non gmo", "gluten free", "resealable bag",
         "high protein", "keto friendly", "kosher"),
        {"size": ("1 pound", "2 pound", "3 pound"),
         "flavor name": ("original", "honey roasted", "sea salt", "smoked")},
        (8.0, 35.0),
    ),
    ProductType(
        "food", "olive oil",
        (GROCERY, "Pantry Staples", "Cooking Oils, Vinegars & Sprays", "Oils", "Olive"),
        ("Extra Virgin Olive Oil", "Olive Oil", "Cold Pressed Olive Oil"),
        ("Italian", "Greek", "Spanish", "Californian", "Estate"),
        ("cold pressed", "organic", "non gmo", "first cold press", "glass bottle",
         "single origin", "kosher", "high polyphenol"),
        {"size": ("500 ml", "750 ml", "1 liter", "3 liter")},
        (9.0, 50.0),
    ),
    ProductType(
        "food", "gummy candy",
        (GROCERY, "Candy & Chocolate", "Gummy Candy"),
        ("Gummy Bears", "Sour Gummy Worms", "Fruit Gummies"),
        ("Bulk", "Party", "Chewy", "Classic", "Mini"),
        ("gluten free", "fat free", "vegan", "individually wrapped", "natural flavors",
         "resealable bag", "kosher", "no artificial colors"),
        {"flavor name": ("assorted fruit", "sour", "strawberry", "peach"),
         "size": ("2 pound", "5 pound", "12 pack")},
        (6.0, 30.0),
    ),
    ProductType(
        "food", "hot sauce",
        (GROCERY, "Condiments & Salad Dressings", "Hot Sauce"),
        ("Hot Sauce", "Chili Sauce", "Sriracha Sauce"),
        ("Craft", "Louisiana", "Smoky", "Fiery", "Classic"),
        ("gluten free", "sugar free", "vegan", "non gmo", "keto friendly", "small batch",
         "no preservatives", "extra hot"),
        {"flavor name": ("original", "garlic", "habanero", "chipotle", "mango"),
         "size": ("5 fl oz", "12 fl oz", "3 pack")},
        (5.0, 25.0),
    ),
    ProductType(
        "food", "granola",
        (GROCERY, "Breakfast Foods", "Cereals", "Granola"),
        ("Granola", "Organic Granola Cereal", "Crunchy Granola Clusters"),
        ("Homestyle", "Ancient Grain", "Crunchy", "Simple", "Nutty"),
        ("organic", "gluten free", "low sugar", "high fiber", "non gmo", "whole grain",
         "plant based", "no artificial flavors"),
        {"flavor name": ("honey almond", "dark chocolate", "blueberry", "maple pecan"),
         "size": ("11 ounce", "2 pack", "4 pack")},
        (5.0, 30.0),
    ),
    # -------------------------------------------------------------- furniture
    ProductType(
        "furniture", "office chair",
        (HOME, "Furniture", "Home Office Furniture", "Home Office Chairs", "Desk Chairs"),
        ("Office Chair", "Ergonomic Desk Chair", "Mesh Office Chair"),
        ("Executive", "Task", "Mid Back", "Computer", "Gaming"),
        ("lumbar support", "adjustable height", "ergonomic design", "breathable mesh",
         "easy assembly", "swivel wheels", "padded armrests", "high back"),
        {"color": ("black", "gray", "white", "blue", "pink")},
        (60.0, 250.0), ("for Home Office", ""),
    ),
    ProductType(
        "furniture", "coffee table",
        (HOME, "Furniture", "Living Room Furniture", "Tables", "Coffee Tables"),
        ("Coffee Table", "Lift Top Coffee Table", "Round Coffee Table"),
        ("Modern", "Farmhouse", "Industrial", "Minimalist", "Nesting"),
        ("easy assembly", "storage shelf", "solid wood", "metal frame", "mid century",
         "rustic", "water resistant", "space saving"),
        {"color": ("walnut", "oak", "black", "white", "rustic brown")},
        (50.0, 300.0), ("for Living Room", ""),
    ),
    ProductType(
        "furniture", "throw pillow covers",
        (HOME, "Bedding", "Decorative Pillows, Inserts & Covers", "Throw Pillow Covers"),
        ("Throw Pillow Covers", "Decorative Cushion Covers", "Pillow Cases"),
        ("Velvet", "Linen", "Boho", "Farmhouse", "Striped"),
        ("machine washable", "hidden zipper", "soft velvet", "set of 2", "double sided",
         "fade resistant", "for living room", "boho style"),
        {"color": ("navy blue", "mustard yellow", "blush pink", "emerald green", "cream",
                   "gray"),
         "size": ("16 x 16 inch", "18 x 18 inch", "20 x 20 inch")},
        (8.0, 30.0), ("for Couch", "for Sofa", ""),
    ),
    ProductType(
        "furniture", "bookshelf",
        (HOME, "Furniture", "Home Office Furniture", "Bookcases"),
        ("Bookshelf", "5 Tier Bookcase", "Ladder Shelf"),
        ("Tall", "Corner", "Open", "Wide", "Narrow"),
        ("easy assembly", "metal frame", "industrial style", "anti tip", "open shelves",
         "space saving", "sturdy construction", "engineered wood"),
        {"color": ("black", "white", "walnut", "rustic brown", "gray")},
        (40.0, 200.0), ("for Bedroom", "for Living Room", ""),
    ),
    ProductType(
        "furniture", "bed sheets",
        (HOME, "Bedding", "Sheets & Pillowcases", "Sheet & Pillowcase Sets"),
        ("Bed Sheet Set", "Microfiber Sheets", "Cotton Sheet Set"),
        ("Luxury", "Hotel", "Soft", "Percale", "Sateen"),
        ("deep pocket", "machine washable", "wrinkle free", "100% cotton", "breathable",
         "fade resistant", "hypoallergenic", "cooling"),
        {"color": ("white", "gray", "navy", "sage green", "beige", "blush pink"),
         "size": ("twin", "full", "queen", "king")},
        (20.0, 90.0),
    ),
    ProductType(
        "furniture", "tv stand",
        (HOME, "Furniture", "Living Room Furniture", "TV & Media Furniture",
         "Television Stands & Entertainment Centers"),
        ("TV Stand", "Entertainment Center", "Media Console"),
        ("Modern", "Farmhouse", "Low Profile", "Corner", "Floating"),
        ("storage cabinet", "cable management", "easy assembly", "led lights", "open shelves",
         "solid wood", "modern design", "for 65 inch tv"),
        {"color": ("black", "white", "walnut", "oak", "gray")},
        (60.0, 280.0), ("for Living Room", ""),
    ),
    ProductType(
        "furniture", "area rug",
        (HOME, "Home Décor Products", "Area Rugs, Runners & Pads", "Area Rugs"),
        ("Area Rug", "Shag Rug", "Washable Rug"),
        ("Moroccan", "Geometric", "Vintage", "Abstract", "Solid"),
        ("non slip", "machine washable", "stain resistant", "non shedding", "low pile",
         "soft touch", "for living room", "pet friendly"),
        {"color": ("gray", "navy blue", "cream", "terracotta", "sage green", "multicolor"),
         "size": ("3 x 5 feet", "5 x 7 feet", "8 x 10 feet")},
        (25.0, 200.0),
    ),
    ProductType(
        "furniture", "desk lamp",
        ("Tools & Home Improvement", "Lighting & Ceiling Fans", "Lamps & Shades", "Desk Lamps"),
        ("LED Desk Lamp", "Desk Lamp", "Table Lamp"),
        ("Modern", "Architect", "Clamp", "Minimalist", "Swing Arm"),
        ("dimmable", "eye caring", "usb charging port", "touch control", "adjustable arm",
         "energy efficient", "memory function", "for home office"),
        {"color": ("black", "white", "silver", "wood grain")},
        (15.0, 70.0),
    ),
)

#: Syllables from which brand names are built ("Velora", "Kintex").
BRAND_STARTS = ("Vel", "Kin", "Aro", "Lum", "Zen", "Nor", "Bri", "Cal", "Dex", "Fio", "Gala",
                "Hal", "Iso", "Jov", "Kor", "Lira", "Mav", "Nex", "Orv", "Pax", "Quin", "Rav",
                "Sol", "Tav", "Ulm", "Vix", "Wren", "Yar", "Zol", "Ember", "Pine", "Stone")
BRAND_ENDS = ("ora", "tex", "ly", "ix", "ano", "ea", "ova", "ent", "ura", "ico", "os", "wick",
              "field", "co", "ia", "ar")

#: Short benefit phrases that finish a bullet point ("FAST CHARGING - ready when you are").
BULLET_ENDINGS = (
    "designed for everyday use at home or on the go",
    "tested to keep its quality use after use",
    "a practical choice that saves time every day",
    "made with care and checked before it ships",
    "so you get exactly what the label promises",
    "loved by customers who want reliable quality",
    "backed by our friendly customer support team",
    "a thoughtful detail that makes a real difference",
)

#: Openings of the description paragraph; {brand} and {head} are filled in.
DESCRIPTION_OPENINGS = (
    "The {brand} {head} is made for people who care about the details.",
    "Meet the {brand} {head}, built to make daily routines a little easier.",
    "Upgrade to the {brand} {head} and feel the difference from day one.",
    "Our {head} combines thoughtful design with dependable quality.",
)

DESCRIPTION_CLOSINGS = (
    "It arrives ready to use and makes a great gift.",
    "Every order is inspected before shipping.",
    "If anything is wrong, contact us and we will make it right.",
    "Thousands of happy customers rely on {brand} every day.",
)

REVIEW_TITLES = ("Great value", "Exactly as described", "Works well", "Would buy again",
                 "Not what I expected", "Pretty good", "Love it", "Just okay")
REVIEW_BODIES = (
    "It is {attr}, just as the listing says.",
    "Arrived quickly and the quality is fine for the price.",
    "I was looking for something {attr} and this delivers.",
    "Does the job. Nothing special, nothing wrong.",
    "My second one; I keep coming back to this brand.",
    "Smaller than I imagined, but it works.",
)

#: Words that open an instruction.
INSTRUCTION_OPENINGS = ("i need", "i am looking for", "i want", "find me", "i'm searching for",
                        "please find", "get me", "i would like")
